#include "checkpoint.h"

#include <algorithm>
#include <fstream>
#include <regex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "error.h"
#include "model.h"
#include "optim.h"
#include "safetensors.h"

namespace hpc::train {
namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "hpctrain-checkpoint-1";

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
    case at::kFloat: return "F32";
    case at::kHalf: return "F16";
    case at::kBFloat16: return "BF16";
    case at::kDouble: return "F64";
    case at::kByte: return "U8";
    case at::kLong: return "I64";
    default: throw std::runtime_error("dtype_name: unsupported scalar type");
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

nlohmann::json config_json(const GptConfig& c) {
  return {{"n_layer", c.n_layer}, {"n_head", c.n_head}, {"n_embd", c.n_embd},
          {"block_size", c.block_size}, {"vocab_size", c.vocab_size}};
}

GptConfig config_from_json(const nlohmann::json& j) {
  GptConfig c;
  c.n_layer = j.at("n_layer");
  c.n_head = j.at("n_head");
  c.n_embd = j.at("n_embd");
  c.block_size = j.at("block_size");
  c.vocab_size = j.at("vocab_size");
  return c;
}

// Copies `src` (any float dtype, CPU) into the parameter `dst` (any device) without autograd.
void assign(at::Tensor& dst, const at::Tensor& src) {
  torch::NoGradGuard no_grad;
  dst.copy_(src.to(dst.scalar_type()));
}

bool is_conv1d_weight(const std::string& name) {
  static const std::regex r(R"(^h\.\d+\.(attn\.c_attn|attn\.c_proj|mlp\.c_fc|mlp\.c_proj)\.weight$)");
  return std::regex_match(name, r);
}

fs::path hf_weights_file(const fs::path& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return path / "model.safetensors";
  return path;
}

}  // namespace

fs::path save_checkpoint(const fs::path& dir, const CheckpointInfo& info, GptImpl& model,
                         AdamW& optimizer, int keep) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    throw UserError(dir.string(), fmt::format("cannot create checkpoint directory: {}", ec.message()),
                    "check --checkpoint-dir");
  }
  WriteList w;
  auto named = model.named_parameters();
  const auto& params = optimizer.params();
  TORCH_CHECK(named.size() == params.size(), "optimizer and model disagree on parameters");
  for (size_t i = 0; i < named.size(); ++i) {
    const std::string& name = named[i].key();
    w.add("model." + name, named[i].value());
    w.add("adam.m." + name, optimizer.exp_avg()[i]);
    w.add("adam.v." + name, optimizer.exp_avg_sq()[i]);
  }
  {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    w.add("rng.cpu", gen.get_state());
  }
  std::map<std::string, std::string> meta = {
      {"format", kFormat},
      {"next_step", std::to_string(info.next_step)},
      {"optimizer_steps", std::to_string(optimizer.steps())},
      {"data_batches", std::to_string(info.data_batches)},
      {"config", config_json(info.config).dump()},
      {"micro_batch", std::to_string(info.micro_batch)},
      {"seq_len", std::to_string(info.seq_len)},
      {"total_batch_tokens", std::to_string(info.total_batch_tokens)},
      {"world", std::to_string(info.world)},
      {"seed", std::to_string(info.seed)},
  };
  const fs::path file = dir / fmt::format("ckpt_{:08d}.safetensors", info.next_step);
  write_safetensors(file, w.entries, meta);

  // Keep the newest `keep` checkpoints.
  std::vector<fs::path> all;
  static const std::regex r(R"(ckpt_\d{8}\.safetensors)");
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (std::regex_match(e.path().filename().string(), r)) all.push_back(e.path());
  }
  std::sort(all.begin(), all.end());
  for (size_t i = 0; keep > 0 && i + size_t(keep) < all.size(); ++i) fs::remove(all[i], ec);
  return file;
}

std::optional<fs::path> latest_checkpoint(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return std::nullopt;
  std::optional<fs::path> best;
  static const std::regex r(R"(ckpt_\d{8}\.safetensors)");
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!std::regex_match(e.path().filename().string(), r)) continue;
    if (!best || e.path().filename() > best->filename()) best = e.path();
  }
  return best;
}

namespace {

CheckpointInfo info_from_metadata(const fs::path& file) {
  // The metadata is in the JSON header; read it without mapping the tensors' bytes twice.
  std::ifstream in(file, std::ios::binary);
  if (!in) throw UserError(file.string(), "cannot open checkpoint", "check --resume");
  unsigned char len[8] = {};
  in.read(reinterpret_cast<char*>(len), 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | len[i];
  std::string header(n, '\0');
  in.read(header.data(), std::streamsize(n));
  if (!in) throw UserError(file.string(), "truncated checkpoint header", "");
  try {
    auto meta = nlohmann::json::parse(header).at("__metadata__");
    if (meta.value("format", "") != kFormat) {
      throw UserError(file.string(), "not an hpctrain checkpoint", "");
    }
    auto num = [&](const char* k) { return std::stoll(meta.at(k).get<std::string>()); };
    CheckpointInfo info;
    info.next_step = num("next_step");
    info.optimizer_steps = num("optimizer_steps");
    info.data_batches = num("data_batches");
    info.config = config_from_json(nlohmann::json::parse(meta.at("config").get<std::string>()));
    info.micro_batch = num("micro_batch");
    info.seq_len = num("seq_len");
    info.total_batch_tokens = num("total_batch_tokens");
    info.world = int(num("world"));
    info.seed = std::stoull(meta.at("seed").get<std::string>());
    return info;
  } catch (const nlohmann::json::exception& e) {
    throw UserError(file.string(), fmt::format("bad checkpoint metadata: {}", e.what()), "");
  }
}

}  // namespace

CheckpointInfo read_checkpoint_info(const fs::path& file) { return info_from_metadata(file); }

void load_checkpoint(const fs::path& file, GptImpl& model, AdamW& optimizer) {
  const CheckpointInfo info = info_from_metadata(file);
  auto st = SafetensorsFile::open(file);
  const auto& t = st.tensors();
  const std::string where = file.string();
  auto get = [&](const std::string& key, const at::Tensor& like) {
    auto it = t.find(key);
    if (it == t.end()) throw UserError(where, fmt::format("missing tensor '{}'", key), "");
    auto v = view_of(it->second, where);
    if (v.sizes() != like.sizes()) {
      throw UserError(where, fmt::format("tensor '{}' has shape {} but the model needs {}", key,
                                         fmt::join(v.sizes(), "x"), fmt::join(like.sizes(), "x")),
                      "resume with the same model flags");
    }
    return v;
  };
  auto named = model.named_parameters();
  for (size_t i = 0; i < named.size(); ++i) {
    const std::string& name = named[i].key();
    assign(named[i].value(), get("model." + name, named[i].value()));
    assign(optimizer.exp_avg()[i], get("adam.m." + name, optimizer.exp_avg()[i]));
    assign(optimizer.exp_avg_sq()[i], get("adam.v." + name, optimizer.exp_avg_sq()[i]));
  }
  optimizer.set_steps(info.optimizer_steps);
  auto it = t.find("rng.cpu");
  if (it != t.end()) {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(view_of(it->second, where).clone());
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
      throw UserError(where, fmt::format("missing tensor '{}'", name),
                      "expected Hugging Face GPT-2 names (wte.weight, h.0.attn.c_attn.weight, ...)");
    }
    at::Tensor v = view_of(it->second, where);
    if (is_conv1d_weight(name)) v = v.t();  // HF Conv1D: [in, out] -> [out, in]
    if (v.sizes() != item.value().sizes()) {
      throw UserError(where, fmt::format("tensor '{}' has shape {} but config.json implies {}",
                                         it->first, fmt::join(v.sizes(), "x"),
                                         fmt::join(item.value().sizes(), "x")), "");
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
  write_file_whole(dir / "config.json", j.dump(2) + "\n");
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
