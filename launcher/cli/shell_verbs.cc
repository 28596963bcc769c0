// shell: an allocation (salloc) and an interactive shell on its first node, set up by the batch
// script itself (backends/salloc_shell.h). Over SSH it runs the system's `ssh -t`, so that the
// terminal, the user's ssh config and agent work as in any ssh session.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "backends/host.h"
#include "backends/salloc_shell.h"
#include "backends/ssh_host.h"
#include "cli/flags.h"
#include "cli/verbs.h"
#include "error.h"
#include "follow/jobs.h"
#include "shell.h"
#include "subprocess.h"

namespace hpc {
namespace {

struct ShellFlags {
  SelectionFlags selection;
  BackendFlags backend;
  bool dry_run = false;
};

// Where salloc runs: this machine, or the login node (connected: host key and login checked).
std::unique_ptr<Host> salloc_host(const BackendChoice& choice) {
  if (choice.kind == "local") {
    throw UserError("--local",
                    "hpclaunch shell needs Slurm: the local backend has no allocation to open "
                    "a shell in",
                    "run it where salloc is (a login node), or pass --host LOGIN; to try a "
                    "program on this machine, use hpclaunch run --local");
  }
  if (choice.kind == "ssh") return make_login_host(choice);  // connected, as run's
  if (!program_on_path("salloc")) {
    throw UserError("hpclaunch shell", "no salloc on this machine",
                    "run it on a login node of the cluster, or pass --host LOGIN");
  }
  return std::make_unique<LocalHost>();
}

// The system's ssh with a terminal, the flags hpclaunch's own connection used, and the command.
std::vector<std::string> ssh_argv(const BackendChoice& choice, const std::string& remote) {
  std::vector<std::string> argv = {"ssh", "-t"};
  if (!choice.ssh_config.empty()) argv.insert(argv.end(), {"-F", choice.ssh_config});
  if (!choice.known_hosts.empty())
    argv.insert(argv.end(), {"-o", "UserKnownHostsFile=" + choice.known_hosts});
  if (!choice.jump.empty()) argv.insert(argv.end(), {"-J", choice.jump});
  argv.insert(argv.end(), {"--", choice.host, remote});
  return argv;
}

void note_left_out(const SallocCommand& command) {
  for (const auto& option : command.left_out) {
    std::cerr << "hpclaunch: shell: salloc has no " << comment_text(option)
              << " (profile.sbatch_extra or the template): left out" << std::endl;
  }
}

// What the dry run prints: the script on standard output, the command on standard error.
int print_dry_run(const Rendered& r) {
  SallocCommand command = salloc_command(r.script, true, r.template_origin);
  note_left_out(command);
  std::vector<std::string> shown = command.argv;
  shown[shown.size() - 2] = "SCRIPT";
  std::cerr << "hpclaunch: shell: would run " << comment_command_line(shown)
            << " (SCRIPT: the script on standard output; nothing was allocated)" << std::endl;
  std::cout << r.script;
  return 0;
}

// The interactive script. A job name no layer set would be the program's (hpctrain), which is
// not what runs: such a job is called "shell" in squeue instead.
Rendered render_shell_script(const ShellFlags& f, const Invocation& in) {
  Rendered r = render_selection(f.selection, std::nullopt, in.command, true);
  auto source = r.spec.sources.find("job.name");
  if (source == r.spec.sources.end() || source->second != "the program's name") return r;
  SelectionFlags named = f.selection;
  named.sets.push_back("job.name=shell");
  return render_selection(named, std::nullopt, in.command, true);
}

int open_shell(const ShellFlags& f, const Invocation& in) {
  Rendered r = render_shell_script(f, in);
  if (f.dry_run) return print_dry_run(r);
  BackendChoice choice = f.backend.choice();
  std::unique_ptr<Host> host = salloc_host(choice);
  SallocCommand command = salloc_command(r.script, srun_has_overlap(*host), r.template_origin);
  check_allocation_fits(*host, command);
  note_left_out(command);
  if (!isatty(STDIN_FILENO)) {
    throw UserError("hpclaunch shell", "standard input is not a terminal",
                    "run it from an interactive terminal (ssh -t, tmux); for a batch job use "
                    "hpclaunch run");
  }
  std::cerr << "hpclaunch: shell: asking " << host->name() << " for " << r.spec.shape.nodes
            << " node(s) x " << r.spec.shape.gpus_per_node
            << " GPU(s); the shell opens on the first node when salloc is granted" << std::endl;
  if (choice.kind != "ssh") exec_in_terminal(command.argv);
  host.reset();  // hpclaunch's own connection ends; the system's ssh makes the terminal session
  exec_in_terminal(ssh_argv(choice, remote_command_line(command.argv)));
}

}  // namespace

VerbHandler define_shell(CLI::App* verb) {
  auto f = std::make_shared<ShellFlags>();
  f->selection.add_to(verb);
  BackendFlags& b = f->backend;
  verb->add_flag("--local", b.local, "refused: the local backend has no allocation");
  verb->add_option("--backend", b.backend, "slurm (salloc here) or ssh (--host)")
      ->check(CLI::IsMember({"slurm", "ssh", "local"}));
  verb->add_option("--host", b.host,
                   "open the shell through this login node (ssh -t; host or ~/.ssh/config alias)");
  verb->add_option("--jump", b.jump, "reach --host through these jump hosts (ssh -J)");
  verb->add_flag("--accept-new-host-key", b.accept_new_host_key,
                 "trust and record an unknown SSH host key (a changed key is always refused)");
  verb->add_option("--ssh-config", b.ssh_config, "SSH config file (default ~/.ssh/config)");
  verb->add_option("--known-hosts", b.known_hosts, "known_hosts file (default ~/.ssh/known_hosts)");
  verb->add_flag("--dry-run", f->dry_run,
                 "print the script and the salloc command; allocate nothing");
  verb->footer(
      "Inside: srun CMD (one task per GPU on every node), torchrun, MASTER_ADDR, MASTER_PORT,\n"
      "WORLD_SIZE as in the batch script. exit or Ctrl-D ends the allocation; hpclaunch exits\n"
      "with the shell's status. Docs: docs/programs.md (Interactive work).\n"
      "Example: hpclaunch shell --preset 1n2g --cluster jsc --set profile.account=myproj");
  return [f](const Invocation& in) { return open_shell(*f, in); };
}

}  // namespace hpc
