// The verbs of the command line, one handler each. cli.cc lists them in one table (kVerbs, as
// ninja lists its tools); each define_<verb> adds the verb's flags to its CLI11 subcommand and
// returns the function that runs it once the command line is parsed.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace hpc {

// What every verb may use besides its own flags.
struct Invocation {
  std::optional<std::vector<std::string>> trainer_args;  // after the first bare "--"
  std::vector<std::string> command;  // argv, argv[0] = "hpclaunch": recorded in scripts
};

using VerbHandler = std::function<int(const Invocation&)>;
using DefineVerb = VerbHandler (*)(CLI::App* verb);

// Presets and profiles (catalog_verbs.cc).
VerbHandler define_presets(CLI::App* verb);
VerbHandler define_clusters(CLI::App* verb);
// Scripts (script_verbs.cc).
VerbHandler define_render(CLI::App* verb);
VerbHandler define_validate(CLI::App* verb);
// Jobs (job_verbs.cc).
VerbHandler define_run(CLI::App* verb);
VerbHandler define_submit(CLI::App* verb);
VerbHandler define_status(CLI::App* verb);
VerbHandler define_logs(CLI::App* verb);
VerbHandler define_cancel(CLI::App* verb);
VerbHandler define_list(CLI::App* verb);
// A run's record used again and compared (record_verbs.cc).
VerbHandler define_rerun(CLI::App* verb);
VerbHandler define_diff(CLI::App* verb);
// An interactive shell in an allocation (shell_verbs.cc).
VerbHandler define_shell(CLI::App* verb);
// Campaigns (campaign_verbs.cc).
VerbHandler define_sweep(CLI::App* verb);
VerbHandler define_tune(CLI::App* verb);
VerbHandler define_report(CLI::App* verb);
// Tools (tool_verbs.cc).
VerbHandler define_hostlist(CLI::App* verb);
VerbHandler define_doctor(CLI::App* verb);

}  // namespace hpc
