#include "sha256.h"

// OpenSSL 3 calls SHA256_Init & co. deprecated in favour of EVP, but keeps them. They run the
// same assembly (SHA-NI, AVX2) without EVP's provider start: that start costs ~0.9 ms in every
// process that hashes (measured here: a program hashing "abc" ran 1.07 ms with SHA256_*, 1.91 ms
// with EVP), a fifth of `hpclaunch render`'s whole time.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

#include <stdexcept>

namespace hpc {

struct Sha256::Context {
  SHA256_CTX sha;
};

Sha256::Sha256() : ctx_(std::make_unique<Context>()) {
  if (SHA256_Init(&ctx_->sha) != 1) {
    throw std::runtime_error("libcrypto: cannot start a SHA-256 digest");
  }
}

Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;
Sha256::~Sha256() = default;

void Sha256::update(std::string_view bytes) {
  if (!ctx_) throw std::logic_error("Sha256::update after hex_digest");
  if (SHA256_Update(&ctx_->sha, bytes.data(), bytes.size()) != 1) {
    throw std::runtime_error("libcrypto: SHA-256 update failed");
  }
}

std::string Sha256::hex_digest() {
  if (!ctx_) throw std::logic_error("Sha256::hex_digest called twice");
  unsigned char digest[SHA256_DIGEST_LENGTH];
  const unsigned int n = SHA256_DIGEST_LENGTH;
  if (SHA256_Final(digest, &ctx_->sha) != 1) {
    throw std::runtime_error("libcrypto: SHA-256 final failed");
  }
  ctx_.reset();
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (unsigned int i = 0; i < n; ++i) {
    out.push_back(hex[digest[i] >> 4]);
    out.push_back(hex[digest[i] & 0xf]);
  }
  return out;
}

std::string sha256_hex(std::string_view data) {
  Sha256 h;
  h.update(data);
  return h.hex_digest();
}

}  // namespace hpc
