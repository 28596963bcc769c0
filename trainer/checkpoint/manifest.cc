#include "checkpoint/manifest.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "error.h"

namespace hpc::train {
namespace {

using ojson = nlohmann::ordered_json;

ojson shard_json(const ShardFile& f) {
  ojson pieces = ojson::array();
  for (const auto& p : f.pieces) pieces.push_back({p.param, p.offset, p.length});
  ojson j = {{"name", f.name}, {"rank", f.rank}, {"bytes", f.bytes}, {"sha256", f.sha256}};
  if (f.chunk_bytes > 0) {
    j["chunk_bytes"] = f.chunk_bytes;
    j["chunk_sha256"] = f.chunk_sha256;
  }
  j["data"] = {{"shard", f.data.shard}, {"position", f.data.position}};
  j["pieces"] = pieces;
  return j;
}

ShardFile shard_from(const nlohmann::json& j, const std::string& where) {
  ShardFile f;
  f.name = j.at("name").get<std::string>();
  f.rank = j.at("rank").get<int>();
  f.bytes = j.at("bytes").get<uint64_t>();
  f.sha256 = j.at("sha256").get<std::string>();
  if (j.contains("chunk_bytes")) {
    f.chunk_bytes = j.at("chunk_bytes").get<uint64_t>();
    f.chunk_sha256 = j.at("chunk_sha256").get<std::vector<std::string>>();
    if (f.chunk_bytes == 0 ||
        f.chunk_sha256.size() != (f.bytes + f.chunk_bytes - 1) / f.chunk_bytes) {
      throw UserError(where,
                      fmt::format("file {}: {} chunk digests for {} bytes in chunks of {}", f.name,
                                  f.chunk_sha256.size(), f.bytes, f.chunk_bytes),
                      "the checkpoint is damaged; use another one");
    }
  }
  f.data.shard = j.at("data").at("shard").get<int64_t>();
  f.data.position = j.at("data").at("position").get<int64_t>();
  for (const auto& p : j.at("pieces")) {
    if (!p.is_array() || p.size() != 3) {
      throw UserError(
          where,
          fmt::format("file {}: a piece is {}, not [param, offset, length]", f.name, p.dump()),
          "the checkpoint is damaged; use another one");
    }
    f.pieces.push_back({p[0].get<size_t>(), p[1].get<int64_t>(), p[2].get<int64_t>()});
  }
  // The file name is joined to the checkpoint directory: nothing that leaves it.
  if (f.name.empty() || f.name.find('/') != std::string::npos || f.name == "." || f.name == "..") {
    throw UserError(
        where,
        fmt::format("file name '{}' is not a plain name in the checkpoint directory", f.name),
        "the checkpoint is damaged; use another one");
  }
  return f;
}

// Pieces inside their parameters.
void check_pieces(const Manifest& m, const std::string& where) {
  for (const auto& f : m.files) {
    for (const auto& p : f.pieces) {
      if (p.param >= m.params.size() || p.offset < 0 || p.length <= 0 ||
          p.offset + p.length > m.params[p.param].numel()) {
        throw UserError(where,
                        fmt::format("file {} has piece [{}, {}, {}] outside the parameters", f.name,
                                    p.param, p.offset, p.length),
                        "the manifest is damaged; use another checkpoint");
      }
    }
  }
}

}  // namespace

int64_t ParamShape::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

std::string checkpoint_dir_name(int64_t step) { return fmt::format("step_{:08d}", step); }

std::optional<int64_t> checkpoint_step(const std::string& name) {
  const std::string prefix = "step_";
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) {
    return std::nullopt;
  }
  if (name.size() - prefix.size() > 18) return std::nullopt;
  int64_t step = 0;
  for (size_t i = prefix.size(); i < name.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return std::nullopt;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

std::string shard_file_name(int rank) { return fmt::format("rank{:05d}.safetensors", rank); }

std::string manifest_to_json(const Manifest& m) {
  ojson params = ojson::array();
  for (const auto& p : m.params) params.push_back({{"name", p.name}, {"shape", p.shape}});
  ojson files = ojson::array();
  for (const auto& f : m.files) files.push_back(shard_json(f));
  const GptConfig& c = m.config;
  ojson j = {
      {"format", kCheckpointFormat},
      {"next_step", m.next_step},
      {"optimizer_steps", m.optimizer_steps},
      {"strategy", m.strategy},
      {"world", m.world},
      {"model",
       {{"n_layer", c.n_layer},
        {"n_head", c.n_head},
        {"n_embd", c.n_embd},
        {"block_size", c.block_size},
        {"vocab_size", c.vocab_size}}},
      {"batch",
       {{"micro_batch", m.micro_batch},
        {"seq_len", m.seq_len},
        {"total_batch_tokens", m.total_batch_tokens}}},
      {"seed", m.seed},
      {"data", {{"tokens_consumed", m.tokens_consumed}}},
      {"rng", {{"file", m.rng_file}, {"tensor", m.rng_tensor}}},
      {"params", params},
      {"files", files},
  };
  return j.dump(1) + "\n";
}

Manifest parse_manifest(const std::string& text, const std::string& where) {
  Manifest m;
  try {
    const auto j = nlohmann::json::parse(text);
    if (j.value("format", "") != kCheckpointFormat) {
      throw UserError(
          where, fmt::format("format is '{}', not {}", j.value("format", ""), kCheckpointFormat),
          "point --resume at a checkpoint written by this hpctrain");
    }
    m.next_step = j.at("next_step").get<int64_t>();
    m.optimizer_steps = j.at("optimizer_steps").get<int64_t>();
    m.strategy = j.at("strategy").get<std::string>();
    m.world = j.at("world").get<int>();
    const auto& c = j.at("model");
    m.config.n_layer = c.at("n_layer").get<int64_t>();
    m.config.n_head = c.at("n_head").get<int64_t>();
    m.config.n_embd = c.at("n_embd").get<int64_t>();
    m.config.block_size = c.at("block_size").get<int64_t>();
    m.config.vocab_size = c.at("vocab_size").get<int64_t>();
    const auto& b = j.at("batch");
    m.micro_batch = b.at("micro_batch").get<int64_t>();
    m.seq_len = b.at("seq_len").get<int64_t>();
    m.total_batch_tokens = b.at("total_batch_tokens").get<int64_t>();
    m.seed = j.at("seed").get<uint64_t>();
    m.tokens_consumed = j.at("data").at("tokens_consumed").get<int64_t>();
    m.rng_file = j.at("rng").at("file").get<std::string>();
    m.rng_tensor = j.at("rng").at("tensor").get<std::string>();
    for (const auto& p : j.at("params")) {
      m.params.push_back(
          {p.at("name").get<std::string>(), p.at("shape").get<std::vector<int64_t>>()});
    }
    for (const auto& f : j.at("files")) m.files.push_back(shard_from(f, where));
  } catch (const nlohmann::json::exception& e) {
    throw UserError(where, fmt::format("not a readable checkpoint manifest: {}", e.what()),
                    "the checkpoint is damaged; use another one");
  }
  if (m.world < 1 || int(m.files.size()) != m.world) {
    throw UserError(where, fmt::format("lists {} files for a world of {}", m.files.size(), m.world),
                    "the checkpoint is damaged; use another one");
  }
  for (size_t i = 0; i < m.files.size(); ++i) {
    if (m.files[i].rank != int(i)) {
      throw UserError(where, fmt::format("files[{}] is rank {}'s", i, m.files[i].rank),
                      "the checkpoint is damaged; use another one");
    }
  }
  check_coverage(m, where);
  return m;
}

std::string shard_file_to_json(const ShardFile& f) { return shard_json(f).dump() + "\n"; }

ShardFile parse_shard_file(const std::string& text, const std::string& where) {
  try {
    return shard_from(nlohmann::json::parse(text), where);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(where, fmt::format("not a readable shard description: {}", e.what()), "");
  }
}

std::vector<Overlap> overlaps(const Manifest& m, const PieceRef& want, const std::string& where) {
  std::vector<Overlap> out;
  const int64_t lo = want.offset, hi = want.offset + want.length;
  for (size_t f = 0; f < m.files.size(); ++f) {
    const auto& pieces = m.files[f].pieces;
    for (size_t k = 0; k < pieces.size(); ++k) {
      const PieceRef& p = pieces[k];
      if (p.param != want.param) continue;
      const int64_t a = std::max(lo, p.offset), b = std::min(hi, p.offset + p.length);
      if (a < b) out.push_back({f, k, a - p.offset, a - lo, b - a});
    }
  }
  std::sort(out.begin(), out.end(),
            [](const Overlap& x, const Overlap& y) { return x.dst_offset < y.dst_offset; });
  int64_t covered =
      0;  // pieces do not overlap (check_coverage): each must start where the last ended
  for (const auto& o : out) {
    if (o.dst_offset != covered) break;
    covered += o.length;
  }
  if (covered != want.length) {
    throw UserError(where,
                    fmt::format("no file holds elements {}..{} of parameter {}", lo + covered,
                                hi - 1, want.param),
                    "the checkpoint is damaged; use another one");
  }
  return out;
}

void check_coverage(const Manifest& m, const std::string& where) {
  check_pieces(m, where);
  std::vector<std::vector<PieceRef>> by_param(m.params.size());
  for (const auto& f : m.files) {
    for (const auto& p : f.pieces) by_param[p.param].push_back(p);
  }
  for (size_t i = 0; i < by_param.size(); ++i) {
    auto& ps = by_param[i];
    std::sort(ps.begin(), ps.end(),
              [](const PieceRef& a, const PieceRef& b) { return a.offset < b.offset; });
    int64_t next = 0;
    for (const auto& p : ps) {
      if (p.offset != next) {
        throw UserError(where,
                        fmt::format("parameter {} ({}): elements from {} are {}", i,
                                    m.params[i].name, std::min(next, p.offset),
                                    p.offset > next ? "in no piece" : "in two pieces"),
                        "the checkpoint is damaged; use another one");
      }
      next = p.offset + p.length;
    }
    if (next != m.params[i].numel()) {
      throw UserError(where,
                      fmt::format("parameter {} ({}): elements from {} are in no piece", i,
                                  m.params[i].name, next),
                      "the checkpoint is damaged; use another one");
    }
  }
}

}  // namespace hpc::train
