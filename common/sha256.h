// SHA-256 from OpenSSL's libcrypto (SHA256_Init/Update/Final; sha256.cc says why not EVP): the
// spec hash printed in every script's header (`sha256sum spec.json` of the resolved spec that
// `hpclaunch render --spec-out` writes gives the same digest) and the checksums of checkpoint
// shards, computed over the bytes as they stream to or from the disk.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace hpc {

// An incremental SHA-256: update() with the bytes in order, then hex_digest() once.
class Sha256 {
 public:
  Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;
  ~Sha256();

  void update(std::string_view bytes);
  void update(const void* data, size_t n) {
    update(std::string_view(static_cast<const char*>(data), n));
  }
  // The digest of everything updated so far, 64 lowercase hex digits. Ends the hasher: a further
  // update() or hex_digest() throws std::logic_error.
  std::string hex_digest();

 private:
  struct Context;
  std::unique_ptr<Context> ctx_;
};

std::string sha256_hex(std::string_view data);

}  // namespace hpc
