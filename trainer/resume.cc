#include "resume.h"

#include <chrono>
#include <cstdio>
#include <optional>

#include <fmt/format.h>

#include "checkpoint/checkpoint.h"
#include "error.h"

namespace hpc::train {
namespace fs = std::filesystem;

namespace {

// A checkpoint for another model or batch shape is refused (the world size, the micro-batch and
// so the accumulation may change: the steps see the same sequences).
void check_resumable(const Manifest& m, const fs::path& dir, const GptConfig& config, int64_t T,
                     int64_t total_batch_tokens) {
  const std::string where = (dir / "manifest.json").string();
  if (!(m.config == config)) {
    throw UserError(where,
                    fmt::format("checkpoint is for model {}, the flags say {}", describe(m.config),
                                describe(config)),
                    "resume with the same model flags");
  }
  if (m.seq_len != T || m.total_batch_tokens != total_batch_tokens) {
    throw UserError(
        where,
        fmt::format("checkpoint has seq-len {} and total batch {} tokens; this run has {} and {}",
                    m.seq_len, m.total_batch_tokens, T, total_batch_tokens),
        "resume with the same --seq-len and --total-batch-tokens (the world size and "
        "--micro-batch may change)");
  }
}

}  // namespace

std::vector<fs::path> resume_candidates(const TrainOptions& o, const std::string& resume,
                                        const GptConfig& config, int64_t T, int rank) {
  std::vector<fs::path> candidates;
  if (resume == "auto") {
    candidates = list_checkpoints(o.checkpoint_dir);
    if (candidates.empty() && has_single_file_checkpoints(o.checkpoint_dir) && rank == 0) {
      std::fputs(fmt::format("hpctrain: warning: {} holds only checkpoints of the earlier "
                             "single-file format (ckpt_*.safetensors), which this hpctrain does "
                             "not read; starting from step 0\n",
                             o.checkpoint_dir)
                     .c_str(),
                 stderr);
    }
  } else if (!resume.empty()) {
    candidates = checkpoints_at(resume);
    if (candidates.empty()) {
      throw UserError("--resume", fmt::format("no checkpoint at {}", resume),
                      "give a checkpoint (DIR/step_NNNNNNNN) or a directory of them, or auto");
    }
  }
  for (const auto& c : candidates) {
    std::optional<Manifest> m;
    try {
      m = read_manifest(c);
    } catch (const UserError&) {
      continue;  // damaged: load_checkpoint reports it and falls back
    }
    check_resumable(*m, c, config, T, o.total_batch_tokens);
    break;
  }
  return candidates;
}

int64_t resume_training(const std::vector<fs::path>& candidates, const std::string& resume,
                        const TrainOptions& o, const GptConfig& config, int64_t B, int64_t T,
                        const std::vector<ParamShape>& layout, dist::Strategy& strategy,
                        DataIterator& train_data, const SecondsBeforeResume& before) {
  const auto r0 = std::chrono::steady_clock::now();
  dist::ProcessGroup& ranks = strategy.group();
  const int rank = ranks.rank();
  const auto cp = load_checkpoint(
      candidates,
      [&](const Checkpoint& c) {
        check_resumable(c.manifest, c.dir, config, T, o.total_batch_tokens);
        if (c.manifest.params != layout) {
          throw UserError((c.dir / "manifest.json").string(),
                          "its parameter names or shapes are not the model's",
                          "resume with the same model flags");
        }
        return strategy.pieces_to_load();
      },
      ranks);
  if (!cp) {
    throw UserError(resume == "auto" ? o.checkpoint_dir : resume,
                    fmt::format("none of the {} checkpoint(s) is whole (see the warnings above)",
                                candidates.size()),
                    "resume from another copy, or start afresh without --resume");
  }
  const Manifest& m = cp->manifest;
  strategy.set_optimizer_steps(m.optimizer_steps);
  strategy.after_load();
  // The data: each rank where it stood, or, with another world size or micro-batch, where the
  // world stood (rank 0's position) plus this rank's offset.
  if (m.world == ranks.world() && m.micro_batch == B) {
    train_data.seek(m.files[size_t(rank)].data.shard, m.files[size_t(rank)].data.position);
  } else {
    train_data.seek(m.files[0].data.shard, m.files[0].data.position + B * T * rank);
  }
  const double loaded =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count();
  if (rank == 0) {
    std::puts(fmt::format("resumed from {} at step {} (saved by {} rank(s) with {}; verified "
                          "and loaded in {:.2f} s; files read in {:.2f} s, CPU {:.2f} s, "
                          "SHA-256 {:.2f} CPU s beside the reads, waited for {:.2f} s; after the "
                          "reads {:.2f} s; before the resume: start-up {:.2f} s, model and "
                          "optimiser {:.2f} s)",
                          cp->dir.string(), m.next_step, m.world, m.strategy, loaded,
                          cp->read_seconds, cp->read_cpu_seconds, cp->hash_seconds,
                          cp->hash_wait_seconds, loaded - cp->read_seconds, before.before_model,
                          before.model)
                  .c_str());
    std::fflush(stdout);
  }
  return m.next_step;
}

}  // namespace hpc::train
