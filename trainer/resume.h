// Resuming a run: which checkpoints --resume (or a requeued job, auto) may use, whether they fit
// the flags, and filling the strategy's state and the data position from the newest whole one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/manifest.h"
#include "data/data.h"
#include "dist/strategy.h"
#include "model/config.h"
#include "train.h"

namespace hpc::train {

// Which checkpoints a resume may use (newest first; none without one to resume). The newest
// readable one is checked against the flags before anything is built; which one is used is
// decided once the ranks can agree (load_checkpoint: a damaged one is skipped for the previous).
std::vector<std::filesystem::path> resume_candidates(const TrainOptions& o,
                                                     const std::string& resume,
                                                     const GptConfig& config, int64_t T, int rank);

// The seconds a run spent before it resumes, for the resume line: from the process's start to
// building the model (rendezvous, data), and building the model and attaching the strategy.
struct SecondsBeforeResume {
  double before_model = 0, model = 0;
};

// Fills the strategy's state (parameters, optimiser) from the newest whole checkpoint of
// `candidates` and moves the training data to where it stood; rank 0 prints the resume line.
// Returns the step to go on from. Throws UserError when none is whole.
int64_t resume_training(const std::vector<std::filesystem::path>& candidates,
                        const std::string& resume, const TrainOptions& o, const GptConfig& config,
                        int64_t B, int64_t T, const std::vector<ParamShape>& layout,
                        dist::Strategy& strategy, DataIterator& train_data,
                        const SecondsBeforeResume& before);

}  // namespace hpc::train
