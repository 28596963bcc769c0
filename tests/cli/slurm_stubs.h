// Running a rendered script the way Slurm would, without Slurm: stub scontrol, getent, module
// and srun first on PATH, SLURM_* variables set, and a parser for #SBATCH lines that follows
// sbatch's own rules.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "harness.h"

namespace cli_test {

// Writes root/bin/{scontrol,getent,module,srun} and makes root/log, where they record:
//   scontrol show hostnames -> prints node01, node02; scontrol requeue ID -> log/requeue
//   scontrol show node -o N -> "NodeName=N ... NodeAddr=$STUB_NODE_ADDR" (default 127.0.0.1)
//   getent ahostsv4 HOST    -> prints "ADDR       STREAM HOST" (ADDR: $STUB_HOST_ADDR, default
//                              127.0.0.1); HOST -> log/getent
//   module ARGS             -> log/module.N (N = 0, 1, ...: one file per call), NUL-separated
//   srun ARGS               -> log/srun.argv (NUL-separated) and log/srun.env (env -0); runs
//                              nothing. With STUB_SRUN_USR1_PARENT=1 it first sends USR1 to
//                              the script (as Slurm's --signal=B:USR1 would) and records a
//                              forwarded USR1 in log/srun.usr1; then, as hpctrain does, writes
//                              the requeue marker (not with STUB_SRUN_MARKER=0) and exits with
//                              STUB_SRUN_STATUS (75). STUB_SIGNAL: the signal it waits for
//                              (USR1); STUB_PARENT_SIGNAL: the one it sends the script (the same).
//                              STUB_SECOND_SIGNAL: sent to the script once the first was
//                              forwarded, 1 s before srun ends (the requeue's TERM).
void install_slurm_stubs(const Sandbox& sb);

// The environment of a batch script in a job of 2 nodes (SLURM_JOB_ID 4242).
std::vector<std::string> job_env(const Sandbox& sb, const std::vector<std::string>& extra = {});

// bash SCRIPT in sb.work() with job_env().
Run run_job_script(const Sandbox& sb, const std::string& script,
                   const std::vector<std::string>& extra_env = {});

// The #SBATCH lines sbatch would read (those before the first line that is neither blank nor a
// comment), each split into its arguments with sbatch's rules: a backslash escapes the next
// character (inside quotes too), ' or " start a quoted part, unquoted whitespace ends an
// argument, an unquoted # starts a comment.
std::vector<std::vector<std::string>> sbatch_directive_args(const std::string& script);

// "--option=value" arguments of all directives -> value (later ones win, as in sbatch).
std::map<std::string, std::string> sbatch_options(const std::string& script);

// Files whose name contains "CANARY", except root/work/CANARY_DIR and what is in it.
std::vector<std::string> canaries(const Sandbox& sb);

// log/srun.argv, log/srun.env as a map, log/module.N in call order.
std::vector<std::string> srun_argv(const Sandbox& sb);
std::map<std::string, std::string> srun_env(const Sandbox& sb);
std::vector<std::vector<std::string>> module_calls(const Sandbox& sb);

}  // namespace cli_test
