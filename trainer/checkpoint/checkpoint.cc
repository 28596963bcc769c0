#include "checkpoint/checkpoint.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "atomic_file.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/shard_reader.h"
#include "dist/process_group.h"
#include "dist/state_piece.h"
#include "error.h"
#include "input_file.h"
#include "json_file.h"
#include "model/model.h"

namespace hpc::train {
namespace fs = std::filesystem;

namespace {

// manifest.json and the shard descriptions list every tensor piece: kilobytes for GPT-2, a few
// MiB for the largest models; more means the file is not one we wrote.
constexpr std::size_t kMaxMetadataBytes = std::size_t{64} << 20;

c10::ScalarType scalar_type_of(const std::string& dtype, const std::string& where) {
  if (dtype == "F32") return at::kFloat;
  if (dtype == "F16") return at::kHalf;
  if (dtype == "BF16") return at::kBFloat16;
  if (dtype == "F64") return at::kDouble;
  if (dtype == "U8") return at::kByte;
  if (dtype == "I64") return at::kLong;
  throw UserError(where, fmt::format("unsupported dtype {}", dtype), "use F32, F16 or BF16");
}

std::string dtype_name(c10::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return "F32";
    case at::kHalf:
      return "F16";
    case at::kBFloat16:
      return "BF16";
    case at::kDouble:
      return "F64";
    case at::kByte:
      return "U8";
    case at::kLong:
      return "I64";
    default:
      throw std::runtime_error("dtype_name: unsupported scalar type");
  }
}

// A CPU tensor viewing the mapped bytes (valid while the file is open).
at::Tensor view_of(const TensorBytes& t, const std::string& where) {
  return torch::from_blob(const_cast<void*>(t.data), t.shape,
                          torch::TensorOptions().dtype(scalar_type_of(t.dtype, where)));
}

// Tensors kept alive on the CPU while a file is written from their bytes.
struct WriteList {
  std::vector<at::Tensor> keep;
  std::vector<std::pair<std::string, TensorBytes>> entries;
  void add(const std::string& name, const at::Tensor& t) {
    at::Tensor c = t.detach().to(at::kCPU).contiguous();
    keep.push_back(c);
    TensorBytes b;
    b.dtype = dtype_name(c.scalar_type());
    b.shape = c.sizes().vec();
    b.data = c.data_ptr();
    b.bytes = size_t(c.numel()) * c.element_size();
    entries.emplace_back(name, b);
  }
};

// Copies `src` (any float dtype, CPU) into the parameter `dst` (any device) without autograd.
void assign(at::Tensor& dst, const at::Tensor& src) {
  torch::NoGradGuard no_grad;
  dst.copy_(src.to(dst.scalar_type()));
}

bool is_conv1d_weight(const std::string& name) {
  static const std::regex r(
      R"(^h\.\d+\.(attn\.c_attn|attn\.c_proj|mlp\.c_fc|mlp\.c_proj)\.weight$)");
  return std::regex_match(name, r);
}

fs::path hf_weights_file(const fs::path& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return path / "model.safetensors";
  return path;
}

}  // namespace

std::vector<ParamShape> param_layout(GptImpl& model) {
  std::vector<ParamShape> out;
  for (auto& item : model.named_parameters()) {
    out.push_back({item.key(), item.value().sizes().vec()});
  }
  return out;
}

namespace {

// Makes the directory's entries (a rename) durable.
void sync_directory(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

std::string sidecar_name(int rank) { return fmt::format("rank{:05d}.json", rank); }

// What is wrong with a shard file's presence and size, or "" (checked before anything is read).
std::string check_shard_size(const fs::path& file, const ShardFile& f) {
  std::error_code ec;
  if (!fs::exists(file, ec)) return "missing";
  const auto size = fs::file_size(file, ec);
  if (ec) return fmt::format("cannot read its size: {}", ec.message());
  if (size != f.bytes) {
    return fmt::format("{} bytes, the manifest says {} ({})", size, f.bytes,
                       size < f.bytes ? "truncated" : "appended to");
  }
  return "";
}

void warn(const std::string& line) {
  std::fputs(("hpctrain: warning: " + line + "\n").c_str(), stderr);
  std::fflush(stderr);
}

void prune_checkpoints(const fs::path& dir, int keep) {
  std::error_code ec;
  // Leftovers of interrupted saves (only rank 0 of a job writing here renames into DIR).
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    for (const char* suffix : {".tmp", ".old"}) {
      const std::string sfx = suffix;
      if (name.size() > sfx.size() &&
          name.compare(name.size() - sfx.size(), sfx.size(), sfx) == 0 &&
          checkpoint_step(name.substr(0, name.size() - sfx.size()))) {
        fs::remove_all(e.path(), ec);
      }
    }
  }
  if (keep <= 0) return;
  const auto all = list_checkpoints(dir);  // newest first
  for (size_t i = size_t(keep); i < all.size(); ++i) fs::remove_all(all[i], ec);
}

}  // namespace

SavedCheckpoint save_checkpoint(const fs::path& dir, Manifest info,
                                const std::vector<dist::StatePiece>& pieces,
                                const DataPosition& data, dist::ProcessGroup& group, int keep) {
  const int rank = group.rank(), world = group.world();
  const std::string name = checkpoint_dir_name(info.next_step);
  const fs::path final_dir = dir / name;
  const fs::path tmp = dir / (name + ".tmp");
  std::error_code ec;
  if (rank == 0) {
    fs::create_directories(dir, ec);
    if (ec) {
      throw UserError(dir.string(),
                      fmt::format("cannot create checkpoint directory: {}", ec.message()),
                      "check --checkpoint-dir");
    }
    fs::remove_all(tmp, ec);
    fs::create_directory(tmp, ec);
    if (ec) {
      throw UserError(tmp.string(), fmt::format("cannot create: {}", ec.message()),
                      "check --checkpoint-dir");
    }
  }
  group.barrier();

  // This rank's file and its description.
  ShardFile mine;
  mine.name = shard_file_name(rank);
  mine.rank = rank;
  mine.data = data;
  WriteList w;
  for (size_t k = 0; k < pieces.size(); ++k) {
    const auto& p = pieces[k];
    if (!p.exp_avg.defined() || !p.exp_avg_sq.defined()) {
      throw std::logic_error("save_checkpoint: a piece without optimiser moments");
    }
    mine.pieces.push_back({p.param, p.offset, p.length});
    w.add(fmt::format("value.{}", k), p.value);
    w.add(fmt::format("exp_avg.{}", k), p.exp_avg);
    w.add(fmt::format("exp_avg_sq.{}", k), p.exp_avg_sq);
  }
  if (rank == 0) {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    w.add("rng.cpu", gen.get_state());
  }
  const WrittenFile written =
      write_safetensors(tmp / mine.name, w.entries, {{"format", "hpctrain-shard"}});
  mine.sha256 = written.sha256;
  mine.chunk_bytes = kShardChunkBytes;
  mine.chunk_sha256 = written.chunk_sha256;
  mine.bytes = written.bytes;
  w = WriteList();  // the CPU copies of the state are not needed any more
  hpc::write_file_atomically(tmp / sidecar_name(rank), shard_file_to_json(mine));
  group.barrier();

  if (rank == 0) {
    info.world = world;
    info.rng_file = shard_file_name(0);
    info.rng_tensor = "rng.cpu";
    info.files.clear();
    for (int r = 0; r < world; ++r) {
      const fs::path side = tmp / sidecar_name(r);
      info.files.push_back(parse_shard_file(
          hpc::read_input_file(side, "checkpoint shard description", kMaxMetadataBytes),
          side.string()));
    }
    check_coverage(info, (tmp / "manifest.json").string());  // the strategy's pieces are complete
    hpc::write_file_atomically(tmp / "manifest.json", manifest_to_json(info));
    for (int r = 0; r < world; ++r) fs::remove(tmp / sidecar_name(r), ec);
    sync_directory(tmp);
    // A checkpoint of the same step (a damaged one that a resume fell back from) is replaced.
    const fs::path old = dir / (name + ".old");
    if (fs::exists(final_dir, ec)) {
      fs::remove_all(old, ec);
      fs::rename(final_dir, old, ec);
      if (ec) {
        throw UserError(final_dir.string(), fmt::format("cannot replace: {}", ec.message()), "");
      }
    }
    fs::rename(tmp, final_dir, ec);
    if (ec) {
      throw UserError(final_dir.string(),
                      fmt::format("cannot rename {} to it: {}", tmp.string(), ec.message()), "");
    }
    sync_directory(dir);
    fs::remove_all(old, ec);
    prune_checkpoints(dir, keep);
  }
  group.barrier();  // no rank goes on (or exits) before the checkpoint is whole
  SavedCheckpoint out{final_dir, 0, written.hash_seconds, written.hash_wait_seconds,
                      written.page_cache};
  for (const auto& f : info.files) out.bytes += f.bytes;
  return out;
}

std::vector<fs::path> list_checkpoints(const fs::path& dir) {
  std::vector<std::pair<int64_t, fs::path>> found;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return {};
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const auto step = checkpoint_step(e.path().filename().string());
    if (step && fs::exists(e.path() / "manifest.json", ec)) found.emplace_back(*step, e.path());
  }
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<fs::path> out;
  for (auto& [step, path] : found) out.push_back(path);
  return out;
}

std::vector<fs::path> checkpoints_at(const fs::path& path) {
  std::error_code ec;
  if (fs::exists(path / "manifest.json", ec)) return {path};
  return list_checkpoints(path);
}

bool has_single_file_checkpoints(const fs::path& dir) {
  static const std::regex r(R"(ckpt_\d{8}\.safetensors)");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return false;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (std::regex_match(e.path().filename().string(), r)) return true;
  }
  return false;
}

Manifest read_manifest(const fs::path& checkpoint_dir) {
  const fs::path file = checkpoint_dir / "manifest.json";
  return parse_manifest(hpc::read_input_file(file, "checkpoint manifest", kMaxMetadataBytes),
                        file.string());
}

namespace {

// A range of one saved tensor ("value.K", "exp_avg.K", "exp_avg_sq.K" of a file) that this rank
// copies into one of its pieces.
struct PieceCopy {
  std::string key;
  int64_t saved_length = 0;  // elements of the saved tensor (the manifest's piece length)
  int64_t src_offset = 0, length = 0;
  at::Tensor dst;  // `length` elements
};

// The CPU seconds (user + system) of this process so far, over all its threads.
double process_cpu_seconds() {
  struct rusage u {};
  ::getrusage(RUSAGE_SELF, &u);
  auto sec = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) * 1e-6; };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

// The message of a UserError about `file`, without the file's name in front.
std::string problem_of(const UserError& e, const fs::path& file) {
  const std::string what = e.what(), prefix = file.string() + ": ";
  return what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what;
}

// The byte ranges of `reader`'s file that fill the `copies`, and the tensor `rng_tensor` into
// *rng when rng is given, into `ranges`. Returns what is wrong (a tensor missing or of another
// length than the manifest's), or "".
std::string byte_ranges(const ShardReader& reader, const fs::path& file,
                        const std::vector<PieceCopy>& copies, const std::string& rng_tensor,
                        std::string* rng, std::vector<ByteRange>& ranges) {
  auto entry = [&](const std::string& key) -> const TensorEntry* {
    auto it = reader.tensors().find(key);
    return it == reader.tensors().end() ? nullptr : &it->second;
  };
  for (const auto& c : copies) {
    const TensorEntry* t = entry(c.key);
    if (!t) return fmt::format("missing tensor '{}'", c.key);
    const uint64_t es = dtype_size(t->dtype);
    const c10::ScalarType type = scalar_type_of(t->dtype, file.string());
    if ((t->end - t->begin) / es != uint64_t(c.saved_length)) {
      return fmt::format("tensor '{}' has {} elements, the manifest says {}", c.key,
                         (t->end - t->begin) / es, c.saved_length);
    }
    at::Tensor dst = c.dst;
    ByteRange r{t->begin + uint64_t(c.src_offset) * es,
                t->begin + uint64_t(c.src_offset + c.length) * es,
                [dst, es, type](uint64_t at, const char* p, size_t n) {
                  const int64_t k = int64_t(n / es);
                  dst.narrow(0, int64_t(at / es), k)
                      .copy_(torch::from_blob(const_cast<char*>(p), {k},
                                              torch::TensorOptions().dtype(type)));
                }};
    r.unit = es;
    // The same layout in memory as in the file: read straight into the tensor.
    if (dst.is_contiguous() && dst.scalar_type() == type && dst.device().is_cpu()) {
      r.direct = static_cast<char*>(dst.data_ptr());
    }
    ranges.push_back(std::move(r));
  }
  if (rng) {
    const TensorEntry* t = entry(rng_tensor);
    if (!t) return fmt::format("missing tensor '{}'", rng_tensor);
    ranges.push_back(
        {t->begin, t->end, [rng](uint64_t, const char* p, size_t n) { rng->append(p, n); }});
  }
  return "";
}

// Reads `file` whole, once: every byte is hashed as it passes, the `copies` are copied into their
// pieces as they pass, and the tensor `rng_tensor` into *rng when rng is given. Returns what is
// wrong with the file (its size or SHA-256 not the manifest's `f`, a tensor missing), or "".
std::string read_verified(const fs::path& file, const ShardFile& f,
                          const std::vector<PieceCopy>& copies, const std::string& rng_tensor,
                          std::string* rng, Checkpoint& stats) {
  try {
    ShardReader reader(file, f.chunk_bytes);
    std::vector<ByteRange> ranges;
    if (auto what = byte_ranges(reader, file, copies, rng_tensor, rng, ranges); !what.empty()) {
      return what;
    }
    const ShardDigest d = reader.read_all(std::move(ranges));
    stats.hash_seconds += d.hash_seconds;
    stats.hash_wait_seconds += d.hash_wait_seconds;
    if (d.bytes != f.bytes) return fmt::format("{} bytes, the manifest says {}", d.bytes, f.bytes);
    for (size_t k = 0; k < f.chunk_sha256.size() && k < d.chunk_sha256.size(); ++k) {
      if (d.chunk_sha256[k] != f.chunk_sha256[k]) {
        return fmt::format("SHA-256 {} does not match the manifest's {} (bytes {} to {})",
                           d.chunk_sha256[k], f.chunk_sha256[k], k * f.chunk_bytes,
                           std::min(f.bytes, (k + 1) * f.chunk_bytes));
      }
    }
    if (f.chunk_bytes == 0 && d.sha256 != f.sha256) {
      return fmt::format("SHA-256 {} does not match the manifest's {}", d.sha256, f.sha256);
    }
    return "";
  } catch (const UserError& e) {
    return problem_of(e, file);
  }
}

// Reads only the byte ranges of `file` that fill the `copies` (and *rng), not hashed: the file is
// another rank's to verify whole (read_verified), and every rank learns whether it was whole.
// Returns what is wrong, or "".
std::string read_needed(const fs::path& file, const std::vector<PieceCopy>& copies,
                        const std::string& rng_tensor, std::string* rng) {
  try {
    ShardReader reader(file);
    std::vector<ByteRange> ranges;
    if (auto what = byte_ranges(reader, file, copies, rng_tensor, rng, ranges); !what.empty()) {
      return what;
    }
    reader.read_ranges(std::move(ranges));
    return "";
  } catch (const UserError& e) {
    return problem_of(e, file);
  }
}

// The copies this rank makes from each file (by index) to fill `pieces`.
std::map<size_t, std::vector<PieceCopy>> plan_copies(const Manifest& m,
                                                     const std::vector<dist::StatePiece>& pieces,
                                                     const std::string& where) {
  std::map<size_t, std::vector<PieceCopy>> out;
  for (const auto& p : pieces) {
    if (p.param >= m.params.size()) {
      throw std::logic_error("load_checkpoint: a piece of an unknown parameter");
    }
    for (const auto& o : overlaps(m, {p.param, p.offset, p.length}, where)) {
      const int64_t saved = m.files[o.file].pieces[o.piece].length;
      auto add = [&](const at::Tensor& dst, const char* what) {
        if (!dst.defined()) return;
        out[o.file].push_back({fmt::format("{}.{}", what, o.piece), saved, o.src_offset, o.length,
                               dst.narrow(0, o.dst_offset, o.length)});
      };
      add(p.value, "value");
      add(p.exp_avg, "exp_avg");
      add(p.exp_avg_sq, "exp_avg_sq");
    }
  }
  return out;
}

// This rank's part of loading `cp` into `pieces`: each file it verifies (file i: rank i mod W),
// read whole once and verified while its ranges are copied, then the byte ranges its pieces need
// from the other files; the CPU generator's state. Returns whether every rank found its files whole
// (the rank verifying a damaged file warns); when not, the pieces are partly filled and the next
// candidate refills them.
bool load_verified(Checkpoint& cp, const std::vector<dist::StatePiece>& pieces,
                   dist::ProcessGroup& group, const std::string& then) {
  torch::NoGradGuard no_grad;
  const size_t rank = size_t(group.rank()), world = size_t(group.world());
  const Manifest& m = cp.manifest;
  const std::string where = (cp.dir / "manifest.json").string();
  const auto copies = plan_copies(m, pieces, where);
  size_t rng_file = m.files.size();  // none
  if (!m.rng_file.empty()) {
    rng_file = 0;
    while (rng_file < m.files.size() && m.files[rng_file].name != m.rng_file) ++rng_file;
    if (rng_file == m.files.size()) {
      throw UserError(where, fmt::format("rng.file '{}' is not one of its files", m.rng_file), "");
    }
  }
  std::string rng;
  bool rng_read = false, bad = false;
  // First the files this rank verifies (file f: rank f mod W), read whole and hashed; then the
  // ranges it needs from the others' files (by then often in the page cache, read by their
  // verifiers), only those bytes and not hashed: every rank learns below whether all were whole.
  for (const bool verify : {true, false}) {
    for (size_t f = 0; f < m.files.size(); ++f) {
      const auto it = copies.find(f);
      const bool verifier = f % world == rank;
      if (verify != verifier || (!verifier && it == copies.end())) continue;
      const fs::path file = cp.dir / m.files[f].name;
      const auto& mine = it == copies.end() ? std::vector<PieceCopy>{} : it->second;
      std::string* rng_out = f == rng_file ? &rng : nullptr;
      const std::string what =
          verifier ? read_verified(file, m.files[f], mine, m.rng_tensor, rng_out, cp)
                   : read_needed(file, mine, m.rng_tensor, rng_out);
      rng_read = rng_read || f == rng_file;
      if (what.empty()) continue;
      bad = true;
      if (verifier) {
        warn(fmt::format("{}: {}; skipping checkpoint {}, {}", file.string(), what, cp.dir.string(),
                         then));
      }
    }
  }
  if (rng_file < m.files.size() && !rng_read) {  // verified by the rank that reads it whole
    try {
      ShardReader reader(cp.dir / m.rng_file);
      auto it = reader.tensors().find(m.rng_tensor);
      if (it == reader.tensors().end()) bad = true;
      if (it != reader.tensors().end()) rng = reader.read_unverified(it->second);
    } catch (const UserError&) {
      bad = true;
    }
  }
  if (group.any_rank(bad)) return false;
  if (rng_file < m.files.size()) {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(torch::from_blob(rng.data(), {int64_t(rng.size())}, at::kByte).clone());
  }
  return true;
}

}  // namespace

std::optional<Checkpoint> load_checkpoint(const std::vector<fs::path>& candidates,
                                          const PiecesFor& pieces_for, dist::ProcessGroup& group) {
  const size_t rank = size_t(group.rank()), world = size_t(group.world());
  for (size_t c = 0; c < candidates.size(); ++c) {
    const fs::path& dir = candidates[c];
    const std::string then =
        c + 1 < candidates.size()
            ? fmt::format("trying the previous one, {}", candidates[c + 1].filename().string())
            : "no older checkpoint to fall back to";
    Checkpoint cp{dir, {}};
    std::string problem;
    try {
      cp.manifest = read_manifest(dir);
    } catch (const UserError& e) {
      problem = e.what();
    }
    if (group.any_rank(!problem.empty())) {
      if (rank == 0) {
        warn(fmt::format("{}; skipping checkpoint {}, {}", problem.empty() ? dir.string() : problem,
                         dir.string(), then));
      }
      continue;
    }
    // Presence and sizes first (nothing read yet): file i by rank i mod W.
    const auto& files = cp.manifest.files;
    std::vector<size_t> sized;
    bool bad = false;
    for (size_t i = rank; i < files.size(); i += world) {
      const std::string what = check_shard_size(dir / files[i].name, files[i]);
      if (what.empty()) {
        sized.push_back(i);
        continue;
      }
      warn(fmt::format("{}: {}; skipping checkpoint {}, {}", (dir / files[i].name).string(), what,
                       dir.string(), then));
      bad = true;
    }
    if (group.any_rank(bad)) {
      // Skipped: this rank's other files are still verified, so that the warnings name every
      // damaged one.
      for (size_t i : sized) {
        Checkpoint ignored;
        const std::string what =
            read_verified(dir / files[i].name, files[i], {}, "", nullptr, ignored);
        if (!what.empty()) {
          warn(fmt::format("{}: {}; skipping checkpoint {}, {}", (dir / files[i].name).string(),
                           what, dir.string(), then));
        }
      }
      continue;
    }
    const auto pieces = pieces_for(cp);
    const auto t0 = std::chrono::steady_clock::now();
    const double cpu0 = process_cpu_seconds();
    const bool whole = load_verified(cp, pieces, group, then);
    cp.read_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    cp.read_cpu_seconds = process_cpu_seconds() - cpu0;
    if (whole) return cp;
  }
  return std::nullopt;
}

GptConfig read_hf_config(const fs::path& path) {
  std::error_code ec;
  const fs::path dir = fs::is_directory(path, ec) ? path : path.parent_path();
  const fs::path file = dir / "config.json";
  std::ifstream in(file);
  if (!in) {
    throw UserError(file.string(), "cannot read the model's config.json",
                    "--init-from needs a directory with model.safetensors and config.json");
  }
  try {
    auto j = nlohmann::json::parse(in);
    GptConfig c;
    c.n_layer = j.at("n_layer");
    c.n_head = j.at("n_head");
    c.n_embd = j.at("n_embd");
    c.block_size = j.contains("n_positions") ? j.at("n_positions").get<int64_t>()
                                             : j.at("n_ctx").get<int64_t>();
    c.vocab_size = j.at("vocab_size");
    return c;
  } catch (const nlohmann::json::exception& e) {
    throw UserError(file.string(), fmt::format("not a GPT-2 config: {}", e.what()),
                    "it needs n_layer, n_head, n_embd, n_positions and vocab_size");
  }
}

void load_hf_weights(const fs::path& path, GptImpl& model) {
  const fs::path file = hf_weights_file(path);
  auto st = SafetensorsFile::open(file);
  const auto& t = st.tensors();
  const std::string where = file.string();
  for (auto& item : model.named_parameters()) {
    const std::string& name = item.key();
    auto it = t.find(name);
    if (it == t.end()) it = t.find("transformer." + name);
    if (it == t.end()) {
      throw UserError(
          where, fmt::format("missing tensor '{}'", name),
          "expected Hugging Face GPT-2 names (wte.weight, h.0.attn.c_attn.weight, ...)");
    }
    at::Tensor v = view_of(it->second, where);
    if (is_conv1d_weight(name)) v = v.t();  // HF Conv1D: [in, out] -> [out, in]
    if (v.sizes() != item.value().sizes()) {
      throw UserError(where,
                      fmt::format("tensor '{}' has shape {} but config.json implies {}", it->first,
                                  fmt::join(v.sizes(), "x"), fmt::join(item.value().sizes(), "x")),
                      "");
    }
    assign(item.value(), v);
  }
}

void export_hf(const fs::path& dir, GptImpl& model) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw UserError(dir.string(), fmt::format("cannot create: {}", ec.message()), "");
  WriteList w;
  for (auto& item : model.named_parameters()) {
    at::Tensor v = item.value();
    if (is_conv1d_weight(item.key())) v = v.t();  // [out, in] -> HF Conv1D [in, out]
    w.add(item.key(), v);
  }
  write_safetensors(dir / "model.safetensors", w.entries, {{"format", "pt"}});
  const GptConfig& c = model.config();
  nlohmann::ordered_json j = {
      {"architectures", {"GPT2LMHeadModel"}},
      {"model_type", "gpt2"},
      {"n_layer", c.n_layer},
      {"n_head", c.n_head},
      {"n_embd", c.n_embd},
      {"n_positions", c.block_size},
      {"n_ctx", c.block_size},
      {"vocab_size", c.vocab_size},
      {"activation_function", "gelu_new"},  // HF's name for GELU with the tanh approximation
      {"layer_norm_epsilon", 1e-5},
      {"resid_pdrop", 0.0},
      {"embd_pdrop", 0.0},
      {"attn_pdrop", 0.0},
      {"tie_word_embeddings", true},
      {"torch_dtype", "float32"},
  };
  hpc::write_file_atomically(dir / "config.json", j.dump(2) + "\n");
}

void export_gradients(const fs::path& file, GptImpl& model) {
  WriteList w;
  for (auto& item : model.named_parameters()) {
    at::Tensor g = item.value().grad();
    if (!g.defined()) g = torch::zeros_like(item.value());
    if (is_conv1d_weight(item.key())) g = g.t();
    w.add(item.key(), g);
  }
  write_safetensors(file, w.entries, {{"format", "pt"}});
}

}  // namespace hpc::train
