#include "checkpoint/checkpoint.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string_view>

#include <fmt/format.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "atomic_file.h"
#include "checkpoint/safetensors.h"
#include "dist/process_group.h"
#include "dist/state_piece.h"
#include "error.h"
#include "input_file.h"
#include "json_file.h"
#include "model/model.h"
#include "sha256.h"

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

// A file mapped read-only (checksums of shard files without reading them into memory).
class MappedFile {
 public:
  explicit MappedFile(const fs::path& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw std::runtime_error(std::strerror(errno));
    struct stat st {};
    ::fstat(fd, &st);
    bytes_ = size_t(st.st_size);
    if (bytes_ > 0) {
      map_ = ::mmap(nullptr, bytes_, PROT_READ, MAP_SHARED, fd, 0);
      if (map_ == MAP_FAILED) {
        map_ = nullptr;
        ::close(fd);
        throw std::runtime_error("cannot map the file");
      }
    }
    ::close(fd);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile() {
    if (map_) ::munmap(map_, bytes_);
  }
  std::string_view view() const {
    return map_ ? std::string_view(static_cast<const char*>(map_), bytes_) : std::string_view();
  }

 private:
  void* map_ = nullptr;
  size_t bytes_ = 0;
};

// Makes the directory's entries (a rename) durable.
void sync_directory(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

std::string sidecar_name(int rank) { return fmt::format("rank{:05d}.json", rank); }

// What is wrong with a shard file, or "" when it is whole.
std::string check_shard_file(const fs::path& file, const ShardFile& f) {
  std::error_code ec;
  if (!fs::exists(file, ec)) return "missing";
  const auto size = fs::file_size(file, ec);
  if (ec) return fmt::format("cannot read its size: {}", ec.message());
  if (size != f.bytes) {
    return fmt::format("{} bytes, the manifest says {} ({})", size, f.bytes,
                       size < f.bytes ? "truncated" : "appended to");
  }
  try {
    MappedFile m(file);
    const std::string sum = sha256_hex(m.view());
    if (sum != f.sha256) {
      return fmt::format("SHA-256 {} does not match the manifest's {}", sum, f.sha256);
    }
  } catch (const std::exception& e) {
    return fmt::format("cannot read: {}", e.what());
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
  mine.sha256 = write_safetensors(tmp / mine.name, w.entries, {{"format", "hpctrain-shard"}});
  mine.bytes = fs::file_size(tmp / mine.name);
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
  SavedCheckpoint out{final_dir, 0};
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

std::optional<Checkpoint> select_checkpoint(const std::vector<fs::path>& candidates,
                                            dist::ProcessGroup& group) {
  const int rank = group.rank(), world = group.world();
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
    bool bad = false;
    const auto& files = cp.manifest.files;
    for (size_t i = size_t(rank); i < files.size(); i += size_t(world)) {
      const fs::path file = dir / files[i].name;
      const std::string what = check_shard_file(file, files[i]);
      if (what.empty()) continue;
      warn(fmt::format("{}: {}; skipping checkpoint {}, {}", file.string(), what, dir.string(),
                       then));
      bad = true;
    }
    if (group.any_rank(bad)) continue;
    return cp;
  }
  return std::nullopt;
}

void load_pieces(const Checkpoint& cp, const std::vector<dist::StatePiece>& pieces) {
  torch::NoGradGuard no_grad;
  const Manifest& m = cp.manifest;
  const std::string where = (cp.dir / "manifest.json").string();
  std::map<size_t, SafetensorsFile> open;
  auto file = [&](size_t f) -> SafetensorsFile& {
    auto it = open.find(f);
    if (it == open.end()) {
      it = open.emplace(f, SafetensorsFile::open(cp.dir / m.files[f].name)).first;
    }
    return it->second;
  };
  auto tensor = [&](size_t f, const std::string& key, int64_t length) {
    const auto& st = file(f);
    const std::string fwhere = st.path().string();
    auto it = st.tensors().find(key);
    if (it == st.tensors().end()) {
      throw UserError(fwhere, fmt::format("missing tensor '{}'", key),
                      "the checkpoint is damaged; use another one");
    }
    at::Tensor v = view_of(it->second, fwhere).view({-1});
    if (v.numel() != length) {
      throw UserError(
          fwhere,
          fmt::format("tensor '{}' has {} elements, the manifest says {}", key, v.numel(), length),
          "the checkpoint is damaged; use another one");
    }
    return v;
  };
  for (const auto& p : pieces) {
    if (p.param >= m.params.size()) {
      throw std::logic_error("load_pieces: a piece of an unknown parameter");
    }
    for (const auto& o : overlaps(m, {p.param, p.offset, p.length}, where)) {
      const int64_t saved = m.files[o.file].pieces[o.piece].length;
      auto copy = [&](const at::Tensor& dst, const char* what) {
        if (!dst.defined()) return;
        at::Tensor src = tensor(o.file, fmt::format("{}.{}", what, o.piece), saved)
                             .narrow(0, o.src_offset, o.length);
        dst.narrow(0, o.dst_offset, o.length).copy_(src);
      };
      copy(p.value, "value");
      copy(p.exp_avg, "exp_avg");
      copy(p.exp_avg_sq, "exp_avg_sq");
    }
  }
  if (!m.rng_file.empty()) {
    size_t f = 0;
    while (f < m.files.size() && m.files[f].name != m.rng_file) ++f;
    if (f == m.files.size()) {
      throw UserError(where, fmt::format("rng.file '{}' is not one of its files", m.rng_file), "");
    }
    const auto& st = file(f);
    auto it = st.tensors().find(m.rng_tensor);
    if (it == st.tensors().end()) {
      throw UserError(st.path().string(), fmt::format("missing tensor '{}'", m.rng_tensor),
                      "the checkpoint is damaged; use another one");
    }
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(view_of(it->second, st.path().string()).clone());
  }
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
