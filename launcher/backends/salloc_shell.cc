#include "backends/salloc_shell.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <map>
#include <optional>
#include <set>

#include "backends/sbatch_options.h"
#include "backends/slurm_backend.h"
#include "error.h"
#include "shell.h"
#include "spec/sbatch_long_options.h"
#include "text.h"

namespace hpc {
namespace {

// sbatch options that salloc 22.05 refuses ("unrecognized option"), asked of the real salloc for
// every name of sbatch_long_options(). --signal is salloc's too, but without sbatch's "B:";
// salloc reads --wait as its --wait-all-nodes=0|1, not as sbatch's "wait for the job to end".
const std::set<std::string>& batch_only_options() {
  static const std::set<std::string> names = {
      "array",       "batch",      "error",  "export",
      "export-file", "ignore-pbs", "input",  "kill-on-invalid-dep",
      "no-requeue",  "open-mode",  "output", "parsable",
      "propagate",   "requeue",    "signal", "test-only",
      "wait",        "wrap"};
  return names;
}

// The batch-only options hpclaunch's own template writes: left out without a word.
const std::set<std::string>& own_batch_options() {
  static const std::set<std::string> names = {"output", "error", "open-mode", "signal", "requeue"};
  return names;
}

// sbatch's short options and the long ones they stand for (true: takes a value).
const std::map<char, std::pair<const char*, bool>>& short_options() {
  static const std::map<char, std::pair<const char*, bool>> table = {
      {'A', {"account", true}},       {'a', {"array", true}},       {'b', {"begin", true}},
      {'c', {"cpus-per-task", true}}, {'C', {"constraint", true}},  {'d', {"dependency", true}},
      {'D', {"chdir", true}},         {'e', {"error", true}},       {'G', {"gpus", true}},
      {'H', {"hold", false}},         {'i', {"input", true}},       {'J', {"job-name", true}},
      {'k', {"no-kill", false}},      {'L', {"licenses", true}},    {'m', {"distribution", true}},
      {'M', {"clusters", true}},      {'n', {"ntasks", true}},      {'N', {"nodes", true}},
      {'o', {"output", true}},        {'O', {"overcommit", false}}, {'p', {"partition", true}},
      {'q', {"qos", true}},           {'Q', {"quiet", false}},      {'s', {"oversubscribe", false}},
      {'S', {"core-spec", true}},     {'t', {"time", true}},        {'v', {"verbose", false}},
      {'w', {"nodelist", true}},      {'W', {"wait", false}},       {'x', {"exclude", true}}};
  return table;
}

struct ScriptOption {
  std::string name;  // canonical long name
  std::optional<std::string> value;
  std::string written;  // as the script has it, for messages
  int line = 0;
};

// The script's #SBATCH arguments as options: long names resolved as sbatch resolves them,
// short ones by sbatch's table, values joined to their option.
std::vector<ScriptOption> script_options(const std::string& script, const std::string& origin) {
  std::vector<SbatchArgument> args = sbatch_script_arguments(script);
  std::vector<ScriptOption> out;
  for (size_t i = 0; i < args.size(); ++i) {
    const SbatchArgument& a = args[i];
    auto where = origin + ":" + std::to_string(a.line);
    auto refuse = [&](const std::string& what) {
      throw UserError(where, "#SBATCH " + comment_text(a.text) + ": " + what,
                      "fix the template's #SBATCH lines (sbatch would refuse them too)");
    };
    ScriptOption o;
    o.line = a.line;
    o.written = a.text;
    bool takes_value = false, value_optional = false;
    std::optional<std::string> inline_value;
    if (a.text.rfind("--", 0) == 0 && a.text.size() > 2) {
      std::string body = a.text.substr(2);
      auto eq = body.find('=');
      if (eq != std::string::npos) inline_value = body.substr(eq + 1);
      SbatchOptionMatch m = resolve_sbatch_long_option(body.substr(0, eq));
      if (!m.option) refuse("not an sbatch option");
      o.name = m.option->canonical;
      takes_value = m.option->argument != SbatchOptionValue::None;
      value_optional = m.option->argument == SbatchOptionValue::Optional;
    } else if (a.text.size() >= 2 && a.text[0] == '-' && a.text[1] != '-') {
      auto it = short_options().find(a.text[1]);
      if (it == short_options().end())
        refuse("an sbatch short option hpclaunch shell does not know");
      o.name = it->second.first;
      takes_value = it->second.second;
      if (a.text.size() > 2) {
        if (!takes_value) refuse("write one option per word");
        inline_value = a.text.substr(2);
      }
    } else {
      refuse("not an option");
    }
    if (inline_value && !takes_value) refuse("takes no value");
    if (takes_value && !inline_value && !value_optional) {
      if (i + 1 >= args.size()) refuse("needs a value");
      inline_value = args[++i].text;
      o.written += " " + *inline_value;
    }
    o.value = inline_value;
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace

SallocCommand salloc_command(const std::string& script, bool srun_has_overlap,
                             const std::string& origin) {
  SallocCommand c;
  for (const ScriptOption& o : script_options(script, origin)) {
    if (batch_only_options().count(o.name)) {
      if (!own_batch_options().count(o.name))
        c.left_out.push_back(o.written + " (line " + std::to_string(o.line) + ")");
      continue;
    }
    c.options.push_back("--" + o.name + (o.value ? "=" + *o.value : ""));
  }
  c.argv = {"salloc"};
  c.argv.insert(c.argv.end(), c.options.begin(), c.options.end());
  c.argv.insert(c.argv.end(), {"srun", "--nodes=1", "--ntasks=1"});
  if (srun_has_overlap) c.argv.push_back("--overlap");
  c.argv.insert(c.argv.end(), {"--preserve-env", "--pty", "bash", "-c", script, "hpclaunch-shell"});
  return c;
}

bool srun_has_overlap(Host& host) {
  CommandResult r = host.run({"srun", "--help"}, CommandOptions{});
  if (!r.spawn_error.empty()) {
    throw BackendError("cannot run srun on " + host.name() + ": " + r.spawn_error +
                       "; hpclaunch shell needs Slurm's salloc and srun there");
  }
  return (r.out + r.err).find("--overlap") != std::string::npos;
}

void check_allocation_fits(Host& host, const SallocCommand& command) {
  std::vector<std::string> argv = {"sbatch", "--test-only"};
  argv.insert(argv.end(), command.options.begin(), command.options.end());
  CommandOptions o;
  o.stdin_data = "#!/bin/bash\ntrue\n";
  CommandResult r = host.run(argv, o);
  if (r.ok()) return;
  if (!r.spawn_error.empty()) {
    throw BackendError("cannot run sbatch on " + host.name() + ": " + r.spawn_error +
                       "; hpclaunch shell needs Slurm's salloc, srun and sbatch there");
  }
  // sbatch's last line says why (a configuration error comes after lines about DNS lookups).
  std::string text = trim(r.err.empty() ? r.out : r.err);
  std::string why = comment_text(text.substr(text.rfind('\n') + 1));
  if (r.timed_out || is_controller_unreachable(why)) {
    throw BackendUnreachable("sbatch --test-only on " + host.name() + ": " + why +
                             "; check that slurmctld is up (scontrol ping)");
  }
  throw BackendError("the cluster cannot grant this allocation (sbatch --test-only on " +
                     host.name() + ": " + why +
                     "); pick a smaller preset, or check partition, account and GPU type "
                     "(hpclaunch render --preset ... shows the #SBATCH lines)");
}

std::string remote_command_line(const std::vector<std::string>& argv) {
  std::string line;
  for (const auto& a : argv) line += (line.empty() ? "" : " ") + shell_quote(a);
  return line;
}

void exec_in_terminal(const std::vector<std::string>& argv) {
  std::cout.flush();
  std::cerr.flush();
  // The CLI ignores SIGPIPE (main.cc), and an ignored signal stays ignored across exec: salloc
  // and the shell get the default back, as from any other shell.
  signal(SIGPIPE, SIG_DFL);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execvp(args[0], args.data());
  int error = errno;
  throw BackendError("cannot run " + argv.front() + ": " + std::strerror(error) +
                     (error == ENOENT ? "; is it installed and on PATH?" : ""));
}

}  // namespace hpc
