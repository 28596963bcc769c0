#include "shell.h"

#include <catch2/catch.hpp>

#include "sha256.h"

using hpc::comment_command_line;
using hpc::comment_text;
using hpc::sbatch_quote;
using hpc::shell_quote;

TEST_CASE("shell_quote: safe words stay bare, everything else is single-quoted", "[shell]") {
  CHECK(shell_quote("hpctrain") == "hpctrain");
  CHECK(shell_quote("--max-steps=5") == "--max-steps=5");
  CHECK(shell_quote("/data/x.npy") == "/data/x.npy");
  CHECK(shell_quote("") == "''");
  CHECK(shell_quote("a b") == "'a b'");
  CHECK(shell_quote("$(touch x)") == "\"\\$(touch x)\"");
  CHECK(shell_quote("it's") == "'it'\\''s'");
  CHECK(shell_quote("`id`") == "\"\\`id\\`\"");
  CHECK(shell_quote("a\\'b\"$") == "\"a\\\\'b\\\"\\$\"");
  CHECK(shell_quote("~") == "'~'");
  CHECK(shell_quote("*") == "'*'");
  CHECK(shell_quote("a\nb") == "'a\nb'");
}

TEST_CASE("sbatch_quote: double quotes with backslash escapes, as sbatch's parser reads them",
          "[shell]") {
  CHECK(sbatch_quote("train") == "train");
  CHECK(sbatch_quote("%x-%j.out") == "%x-%j.out");
  CHECK(sbatch_quote("my job") == "\"my job\"");
  CHECK(sbatch_quote("a\"b") == "\"a\\\"b\"");
  CHECK(sbatch_quote("a\\b") == "\"a\\\\b\"");
  CHECK(sbatch_quote("#1") == "\"#1\"");
  CHECK(sbatch_quote("") == "\"\"");
}

TEST_CASE("comment_text keeps a comment on one line", "[shell]") {
  CHECK(comment_text("plain") == "plain");
  CHECK(comment_text("a\nrm -rf /") == "a\\nrm -rf /");
  CHECK(comment_text("tab\there\r") == "tab\\there\\r");
  CHECK(comment_text(std::string("nul\0x", 5)) == "nul\\x00x");
  CHECK(comment_command_line({"hpclaunch", "render", "--", "a b", "x\ny"}) ==
        "hpclaunch render -- 'a b' $'x\\ny'");
  CHECK(comment_command_line({"it's\n"}) == "$'it\\'s\\n'");
}

TEST_CASE("sha256 matches FIPS 180-4 test vectors", "[sha256]") {
  CHECK(hpc::sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(hpc::sha256_hex("abc") ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(hpc::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // Lengths around the padding boundary (55, 56, 63, 64 bytes) against known digests.
  CHECK(hpc::sha256_hex(std::string(55, 'a')) ==
        "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  CHECK(hpc::sha256_hex(std::string(56, 'a')) ==
        "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  CHECK(hpc::sha256_hex(std::string(64, 'a')) ==
        "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
  CHECK(hpc::sha256_hex(std::string(1000000, 'a')) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}
