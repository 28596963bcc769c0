// The launch mode and the program it starts: hpctrain (with a strategy), or the user's own
// command under srun (one task per GPU) or torchrun (one task per node). docs/programs.md.
//
// hpctrain's keys in the defaults (strategy, trainer.program, trainer.args) do not apply to a
// user's program: under srun and torchrun they are dropped, and a strategy or trainer.command
// set above the defaults (project file, command line, --set) is refused.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hpc {

// Names the key path as the user would find it ("--launch", "hpclaunch.json: launch").
using WhereFn = std::function<std::string(const std::string& path)>;

// The mode named by `mode` ("" is hpctrain). Throws UserError for an unknown one, with a
// suggestion.
std::string check_launch_mode(const std::string& mode, const std::string& where);

// Refuses a strategy that a layer above the defaults set for a non-hpctrain mode. `origin` is
// the layer that set it (empty: none).
void refuse_strategy_for_program(const std::string& launch, const std::string& origin,
                                 const std::set<std::string>& default_origins,
                                 const WhereFn& where);

// Puts the words after `--` into the merged document. hpctrain: appended to trainer.args (as
// always). srun, torchrun: hpctrain's keys from the defaults go (strategy, trainer.program,
// trainer.args); a trainer.command is refused; without a trainer.program from a higher layer,
// the first word is the program and the rest its arguments.
void apply_program_words(nlohmann::json& doc, std::map<std::string, std::string>& sources,
                         const std::string& launch, const std::set<std::string>& default_origins,
                         const std::optional<std::vector<std::string>>& words,
                         const WhereFn& where);

// torchrun.command for launch torchrun: the document's list (checked), or ["torchrun"], which
// is then written into the document so that the spec hash covers it.
std::vector<std::string> read_torchrun_command(nlohmann::json& doc,
                                               std::map<std::string, std::string>& sources,
                                               const WhereFn& where);

// Sets job.name from the program when no layer set it (job_name_from_program in spec.h).
void set_job_name_from_program(nlohmann::json& doc, std::map<std::string, std::string>& sources);

}  // namespace hpc
