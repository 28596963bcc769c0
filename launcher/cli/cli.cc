// The hpclaunch command line: one table of verbs (kVerbs, as ninja's kTools), each a handler in
// cli/*_verbs.cc; here the parse, the dispatch, and the one-line error for every failure.
#include "cli/cli.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <streambuf>

#include "backends/backend.h"
#include "cli/complete.h"
#include "cli/flags.h"
#include "cli/verbs.h"
#include "error.h"
#include "man_page.h"
#include "posix_io.h"
#include "shell.h"
#include "spec/suggest.h"
#include "text.h"
#include "version_line.h"

namespace hpc {
namespace {

constexpr const char* kExamples = R"(Examples:
  hpclaunch presets list
  hpclaunch clusters show jsc
  hpclaunch render --preset 2n4g --strategy fsdp --cluster jsc --set profile.account=myproj \
      -o job.sbatch
  hpclaunch render --preset 1n2g --strategy ddp -- --model tiny --max-steps 5
  hpclaunch validate --preset 2n4g --cluster jsc --set profile.account=myproj --live
  hpclaunch run --preset 2n4g --strategy fsdp --cluster jsc --set profile.account=myproj
  hpclaunch run --preset 1n2g --local -- --model tiny --max-steps 20
  hpclaunch run --preset 2n4g --launch srun -- python train.py --lr 3e-4       (docs/programs.md)
  hpclaunch run --preset 2n4g --launch torchrun -- python train.py --lr 3e-4
  hpclaunch shell --preset 2n2g --cluster jsc --set profile.account=myproj
  hpclaunch status 12345; hpclaunch logs -f 12345 --rank 0; hpclaunch cancel 12345; hpclaunch list
  hpclaunch rerun 12345 --set shape.time=01:00:00; hpclaunch diff 12345 12346   (docs/records.md)
  hpclaunch hostlist expand 'node[01-03],gpu-a[1-2]'
  hpclaunch doctor --cluster jsc
  hpclaunch sweep --presets 1n1g,1n2g,2n2g --strategy ddp,fsdp --scaling strong -- --model tiny
  hpclaunch report sweeps/1n1g_1n2g_2n2g-ddp_fsdp-strong
  hpclaunch tune --cluster jsc --preset 2n4g --grid grid.json; hpclaunch clusters diff jsc jsc-tuned
Exit status (docs/backends.md):
  0    done: the job COMPLETED, or the command did what it says
  2    bad input: fix the flags, files or spec (one line says what); nothing was submitted
  69   the cluster or login node could not be reached: retry later
  74   standard output could not be written
  N    a job that ran and failed: its own exit code (124 TIMEOUT, 125 NODE_FAIL,
       126 PREEMPTED, 137 OUT_OF_MEMORY, 143 CANCELLED, 75 lost; 130: Ctrl-C, it goes on)
Docs: docs/quickstart.md, docs/presets.md, docs/clusters.md
)";

struct Verb {
  const char* name;
  const char* help;
  bool takes_trainer_args;  // arguments after -- go to hpctrain
  DefineVerb define;
};

// In the order --help lists them.
const Verb kVerbs[] = {
    {"presets", "list or show shape presets (nodes x GPUs)", false, define_presets},
    {"clusters", "list or show cluster profiles", false, define_clusters},
    {"render", "print or write the batch script; arguments after -- go to hpctrain", true,
     define_render},
    {"validate", "check the merged spec and the rendered script (bash -n, shellcheck)", true,
     define_validate},
    {"run",
     "render, submit and follow a job until it ends; arguments after -- go to hpctrain (with "
     "--launch srun|torchrun: your command)",
     true, define_run},
    {"submit", "render and submit; prints the job id", true, define_submit},
    {"shell",
     "an allocation (salloc) and an interactive shell on its first node, with the batch "
     "script's modules, environment and rendezvous variables; exit ends the allocation",
     false, define_shell},
    {"status", "state, reason, nodes, elapsed, exit code, requeues", false, define_status},
    {"logs", "print a job's output; -f follows it until it ends", false, define_logs},
    {"cancel", "cancel a job", false, define_cancel},
    {"list", "past runs under ./runs", false, define_list},
    {"rerun",
     "submit a run's saved spec again (--set KEY=VALUE over it); refused when its code changed "
     "since, unless --force",
     false, define_rerun},
    {"diff", "what differs between two runs: spec keys, program, versions, nodes, figures", false,
     define_diff},
    {"hostlist", "expand or compress Slurm host lists", false, define_hostlist},
    {"sweep",
     "submit one job per preset x strategy, measure tokens/s, write speedup plots; "
     "arguments after -- go to hpctrain",
     true, define_sweep},
    {"doctor", "on a node or in a job: GPU topology, InfiniBand, interfaces, MASTER_ADDR, Slurm",
     false, define_doctor},
    {"tune",
     "one all-reduce benchmark job per candidate set of NCCL variables; writes the winner as "
     "a cluster profile NAME-tuned; arguments after -- go to hpctrain bench-allreduce",
     true, define_tune},
    {"report", "re-render a sweep's summary.md and plots; --compare A B: two sweeps side by side",
     false, define_report},
};

// The sections of `hpclaunch --help-man` after the commands (the rest comes from the App).
ManPageText man_page_text() {
  return {"hpclaunch",
          version_line("hpclaunch"),
          "hpclaunch COMMAND [OPTIONS] [-- ARGS...]",
          {{"Environment", R"(HPCLAUNCH_PATH
  folders searched first for defaults.json, shapes/, clusters/ and templates/ (colon-separated)
XDG_CONFIG_HOME
  the user's folder is $XDG_CONFIG_HOME/hpclaunch (default ~/.config/hpclaunch)
HPCLAUNCH_DATA_DIR
  the built-in presets and templates (default: ../share/hpclaunch beside the binary))"},
           {"Files",
            R"(PREFIX/share/hpclaunch/presets/    shape presets, cluster profiles, defaults.json
PREFIX/share/hpclaunch/templates/  the batch-script template
./runs/                            run directories: script, log, run.json)"},
           {"See also",
            "hpctrain(1), sbatch(1), srun(1), salloc(1), module(1). The guides: "
            "PREFIX/share/doc/hpclaunch/ (quickstart.md, presets.md, clusters.md, "
            "backends.md)."}}};
}

// `hpclaunch __complete CWORD WORD...` (the shells' completion scripts): one candidate a line.
int print_completions(const CLI::App& app, const std::vector<std::string>& raw_args) {
  if (raw_args.size() < 3 || raw_args[2].size() > 6 || !is_plain_whole_number(raw_args[2])) {
    std::cerr << "hpclaunch: error: __complete: expected CWORD WORD... (the index of the word "
                 "being completed, then the words); it is for the completion scripts, see "
                 "docs/install.md"
              << std::endl;
    return kExitUsage;
  }
  std::vector<std::string> words(raw_args.begin() + 3, raw_args.end());
  size_t cword = std::stoul(raw_args[2]);
  for (const auto& c : complete_words(app, words, cword, catalog_completion_sources())) {
    std::cout << c << "\n";
  }
  return 0;
}

// Parses args; a mistyped verb or a bad flag is one line and exit status 2.
int parse(CLI::App& app, const std::vector<std::string>& args) {
  // A mistyped verb: name it and suggest the closest one (CLI11 only says one is required).
  if (args.size() > 1 && !args[1].empty() && args[1][0] != '-') {
    std::vector<std::string> verbs;
    for (const auto& v : kVerbs) verbs.push_back(v.name);
    if (std::find(verbs.begin(), verbs.end(), args[1]) == verbs.end()) {
      std::cerr << "hpclaunch: error: unknown command \"" << comment_text(args[1]) << "\"; "
                << suggest_fix(args[1], verbs, "commands") << std::endl;
      return kExitUsage;
    }
  }
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "hpclaunch: error: " << printable_first_line(e.what()) << "; see hpclaunch --help"
              << std::endl;
    return kExitUsage;
  }
  return -1;
}

// std::cout's buffer while a command runs: it writes to descriptor 1 itself and keeps the
// errno of the first write that failed, so that a full disk or a closed pipe is named.
class StdoutBuffer : public std::streambuf {
 public:
  ~StdoutBuffer() override { flush_out(); }
  int error() const { return error_; }
  bool flush_out() {
    if (!error_ && !pending_.empty() && !write_all(STDOUT_FILENO, pending_)) error_ = errno;
    pending_.clear();
    return error_ == 0;
  }

 protected:
  int overflow(int c) override {
    if (c == traits_type::eof()) return sync() == 0 ? 0 : c;
    pending_ += static_cast<char>(c);
    return pending_.size() < kSize || flush_out() ? c : traits_type::eof();
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    pending_.append(s, static_cast<size_t>(n));
    return pending_.size() < kSize || flush_out() ? n : 0;
  }
  int sync() override { return flush_out() ? 0 : -1; }

 private:
  static constexpr size_t kSize = 1 << 16;
  std::string pending_;
  int error_ = 0;
};

// A command whose output did not reach standard output (a full disk, a reader that went away:
// SIGPIPE is ignored, main.cc) has failed, however well the rest went: one line, kExitOutput.
int finish_stdout(int status, StdoutBuffer& out) {
  if (out.flush_out() || status != 0) return status;  // a failing command has said why already
  std::cerr << "hpclaunch: error: standard output: cannot write (" << std::strerror(out.error())
            << "); the output is incomplete; check the disk or the command reading it" << std::endl;
  return kExitOutput;
}

int dispatch(const std::vector<std::string>& raw_args) {
  // Everything after the first bare "--" goes to hpctrain untouched.
  std::vector<std::string> args;
  std::optional<std::vector<std::string>> trainer_args;
  for (size_t i = 0; i < raw_args.size(); ++i) {
    if (i > 0 && raw_args[i] == "--" && !trainer_args) {
      trainer_args.emplace(raw_args.begin() + static_cast<long>(i) + 1, raw_args.end());
      break;
    }
    args.push_back(raw_args[i]);
  }
  // The header records how the script was made, without the build directory's path.
  std::vector<std::string> command = raw_args;
  if (!command.empty()) command[0] = "hpclaunch";

  Invocation invocation{trainer_args, command};

  CLI::App app{"hpclaunch: declarative presets and cluster profiles -> reviewed sbatch scripts",
               "hpclaunch"};
  app.footer(kExamples);
  app.set_version_flag("--version", version_line("hpclaunch"));
  app.require_subcommand(1);
  std::vector<std::pair<CLI::App*, VerbHandler>> handlers;
  for (const auto& v : kVerbs) {
    CLI::App* sub = app.add_subcommand(v.name, v.help);
    handlers.emplace_back(sub, v.define(sub));
    refuse_empty_values(sub);
  }
  require_plain_numbers(&app);
  // Hidden entry points for the build and the shells: not verbs, not in --help.
  if (raw_args.size() > 1 && raw_args[1] == "__complete") return print_completions(app, raw_args);
  if (args.size() == 2 && args[1] == "--help-man") {
    std::cout << man_page(app, man_page_text());
    return 0;
  }
  if (int status = parse(app, args); status >= 0) return status;

  size_t chosen = 0;
  while (chosen < handlers.size() && !handlers[chosen].first->parsed()) ++chosen;
  if (chosen == handlers.size()) return 0;
  if (trainer_args && !kVerbs[chosen].takes_trainer_args) {
    std::cerr << "hpclaunch: error: --: arguments after -- are for hpctrain (or your program "
                 "under --launch) and only go with render, validate, run, submit, sweep and "
                 "tune; remove them or use one of those"
              << std::endl;
    return kExitUsage;
  }
  try {
    return handlers[chosen].second(invocation);
  } catch (const UserError& e) {
    // One line: a value's newline is shown as \n, never allowed to split the message.
    std::cerr << "hpclaunch: error: " << comment_text(e.what()) << std::endl;
    return kExitUsage;
  } catch (const OutputError& e) {
    std::cerr << "hpclaunch: error: " << comment_text(e.what()) << std::endl;
    return kExitOutput;
  } catch (const BackendUnreachable& e) {
    // The cluster could not be reached after bounded retries: its own status, not bad input.
    std::cerr << "hpclaunch: error: " << comment_text(e.what()) << std::endl;
    return kExitUnreachable;
  } catch (const BackendError& e) {
    // Unreachable cluster, refused submission: nothing was submitted (or it was cancelled).
    std::cerr << "hpclaunch: error: " << comment_text(e.what()) << std::endl;
    return kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "hpclaunch: internal error: " << printable_first_line(e.what())
              << " (please report it)" << std::endl;
    return 1;
  }
}

}  // namespace

int run_cli(const std::vector<std::string>& raw_args) {
  std::cout.flush();
  StdoutBuffer out;
  std::streambuf* before = std::cout.rdbuf(&out);
  int status = dispatch(raw_args);
  status = finish_stdout(status, out);
  std::cout.rdbuf(before);
  std::cout.clear();
  return status;
}

}  // namespace hpc
