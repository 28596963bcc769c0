#include "checkpoint/manifest.h"

#include <catch2/catch.hpp>

#include "error.h"

using namespace hpc::train;

namespace {

// Two parameters of 10 and 6 elements saved by `world` ranks as FlatShards splits them
// (S = ceil(16 / world)).
Manifest sample(int world) {
  Manifest m;
  m.next_step = 6;
  m.optimizer_steps = 6;
  m.strategy = "zero2";
  m.world = world;
  m.config = GptConfig{2, 2, 64, 64, 256};
  m.micro_batch = 2;
  m.seq_len = 32;
  m.total_batch_tokens = 256;
  m.seed = 5;
  m.tokens_consumed = 6 * 256;
  m.rng_file = "rank00000.safetensors";
  m.rng_tensor = "rng.cpu";
  m.params = {{"a.weight", {2, 5}}, {"b.bias", {6}}};
  const int64_t total = 16, s = (total + world - 1) / world;
  for (int r = 0; r < world; ++r) {
    ShardFile f;
    f.name = shard_file_name(r);
    f.rank = r;
    f.bytes = 100 + uint64_t(r);
    f.sha256 = std::string(64, 'a');
    if (r > 0) {  // rank 0's file as a manifest before chunks wrote it
      f.chunk_bytes = 64;
      f.chunk_sha256 = {std::string(64, 'b'), std::string(64, 'c')};
    }
    f.data = {0, 64 * r};
    const int64_t lo = r * s, hi = std::min(total, lo + s);
    if (lo < std::min<int64_t>(hi, 10)) f.pieces.push_back({0, lo, std::min<int64_t>(hi, 10) - lo});
    if (std::max<int64_t>(lo, 10) < hi) {
      f.pieces.push_back({1, std::max<int64_t>(lo, 10) - 10, hi - std::max<int64_t>(lo, 10)});
    }
    m.files.push_back(f);
  }
  return m;
}

}  // namespace

TEST_CASE("checkpoint names: step_ and rank file names round-trip") {
  CHECK(checkpoint_dir_name(1234) == "step_00001234");
  CHECK(checkpoint_step("step_00001234") == 1234);
  CHECK(checkpoint_step("step_00001234.tmp") == std::nullopt);
  CHECK(checkpoint_step("step_") == std::nullopt);
  CHECK(checkpoint_step("ckpt_00000005.safetensors") == std::nullopt);
  CHECK(shard_file_name(3) == "rank00003.safetensors");
}

TEST_CASE("manifest: JSON round trip keeps every field") {
  const Manifest m = sample(3);
  const Manifest back = parse_manifest(manifest_to_json(m), "manifest.json");
  CHECK(back.next_step == 6);
  CHECK(back.optimizer_steps == 6);
  CHECK(back.strategy == "zero2");
  CHECK(back.world == 3);
  CHECK(back.config == m.config);
  CHECK(back.total_batch_tokens == 256);
  CHECK(back.seed == 5);
  CHECK(back.tokens_consumed == 1536);
  CHECK(back.rng_file == "rank00000.safetensors");
  CHECK(back.params == m.params);
  REQUIRE(back.files.size() == 3);
  CHECK(back.files[1].data.position == 64);
  CHECK(back.files[2].pieces == m.files[2].pieces);
  CHECK(back.files[2].bytes == 102);
  CHECK(back.files[0].chunk_bytes == 0);
  CHECK(back.files[0].chunk_sha256.empty());
  CHECK(back.files[2].chunk_bytes == 64);
  CHECK(back.files[2].chunk_sha256 == m.files[2].chunk_sha256);
}

TEST_CASE("manifest: damaged ones are refused naming the file") {
  auto refused = [](const std::string& text, const std::string& what) {
    try {
      parse_manifest(text, "ck/step_00000006/manifest.json");
    } catch (const hpc::UserError& e) {
      const std::string msg = e.what();
      CHECK(msg.find("ck/step_00000006/manifest.json") == 0);
      CHECK(msg.find(what) != std::string::npos);
      return;
    }
    FAIL("accepted: " << text.substr(0, 80));
  };
  refused("{not json", "not a readable checkpoint manifest");
  refused(R"({"format": "hpctrain-checkpoint-1"})", "format");
  std::string j = manifest_to_json(sample(2));
  refused(j.substr(0, j.size() / 2), "not a readable");

  Manifest chunks = sample(2);
  chunks.files[1].chunk_sha256.pop_back();  // 101 bytes in chunks of 64: 2 digests
  refused(manifest_to_json(chunks), "1 chunk digests for 101 bytes");

  Manifest gap = sample(2);
  gap.files[1].pieces.pop_back();  // b.bias's last elements in no file
  refused(manifest_to_json(gap), "in no piece");
  Manifest twice = sample(2);
  twice.files[1].pieces.push_back({0, 0, 2});
  refused(manifest_to_json(twice), "in two pieces");
  Manifest outside = sample(1);
  outside.files[0].pieces.push_back({1, 5, 4});
  refused(manifest_to_json(outside), "outside the parameters");
  Manifest escape = sample(1);
  escape.files[0].name = "../../etc/passwd";
  refused(manifest_to_json(escape), "not a plain name");
  Manifest short_world = sample(2);
  short_world.world = 3;
  refused(manifest_to_json(short_world), "2 files for a world of 3");
}

TEST_CASE("overlaps: a range is found in whichever files hold it, in order") {
  const Manifest m = sample(
      4);  // S = 4: rank 0 [0,4) of a; 1 [4,8) of a; 2 [8,10) of a + [0,2) of b; 3 [2,6) of b
  auto ov = overlaps(m, {0, 3, 6}, "m");  // a[3..9)
  REQUIRE(ov.size() == 3);
  CHECK((ov[0].file == 0 && ov[0].src_offset == 3 && ov[0].dst_offset == 0 && ov[0].length == 1));
  CHECK((ov[1].file == 1 && ov[1].src_offset == 0 && ov[1].dst_offset == 1 && ov[1].length == 4));
  CHECK((ov[2].file == 2 && ov[2].piece == 0 && ov[2].src_offset == 0 && ov[2].dst_offset == 5 &&
         ov[2].length == 1));

  auto b = overlaps(m, {1, 0, 6}, "m");  // all of b: rank 2's second piece, then rank 3's
  REQUIRE(b.size() == 2);
  CHECK((b[0].file == 2 && b[0].piece == 1 && b[0].length == 2));
  CHECK((b[1].file == 3 && b[1].piece == 0 && b[1].dst_offset == 2 && b[1].length == 4));

  // The same parameter from a world of 1, 2 and 3: the pieces always add up to the range.
  for (int w : {1, 2, 3, 5, 16}) {
    const Manifest mw = sample(w);
    int64_t n = 0;
    for (const auto& o : overlaps(mw, {0, 0, 10}, "m")) n += o.length;
    CHECK(n == 10);
  }
}

TEST_CASE("overlaps: a range no file holds is an error naming the elements") {
  Manifest m = sample(2);
  m.files[1].pieces.clear();  // (not through parse_manifest, which would refuse it)
  try {
    overlaps(m, {1, 0, 6}, "ck/manifest.json");
    FAIL("no error");
  } catch (const hpc::UserError& e) {
    CHECK(std::string(e.what()).find(
              "ck/manifest.json: no file holds elements 0..5 of parameter 1") == 0);
  }
}
