#include "slurm_stubs.h"

#include <sys/stat.h>

#include <cctype>

namespace cli_test {
namespace {

void write_executable(const fs::path& path, const std::string& text) {
  write_file(path, text);
  fs::permissions(path, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec);
}

}  // namespace

void install_slurm_stubs(const Sandbox& sb) {
  fs::path bin = sb.root() / "bin";
  fs::create_directories(sb.root() / "log");
  write_executable(bin / "scontrol", R"(#!/bin/bash
case "$1" in
  show)
    case "$2" in
      hostnames) printf '%s\n' node01 node02 ;;
      node)
        printf 'NodeName=%s Arch=x86_64 NodeAddr=%s NodeHostName=%s\n' \
          "$4" "${STUB_NODE_ADDR:-127.0.0.1}" "$4" ;;
      *) exit 1 ;;
    esac ;;
  requeue)
    printf '%s\n' "$*" >>"${STUB_LOG}/requeue" ;;
  *) exit 1 ;;
esac
)");
  write_executable(bin / "getent", R"(#!/bin/bash
printf '%s\n' "$2" >>"${STUB_LOG}/getent"
printf '%s       STREAM %s\n' "${STUB_HOST_ADDR:-127.0.0.1}" "$2"
)");
  write_executable(bin / "module", R"(#!/bin/bash
i=0
while [[ -e "${STUB_LOG}/module.$i" ]]; do i=$((i + 1)); done
printf '%s\0' "$@" >"${STUB_LOG}/module.$i"
)");
  write_executable(bin / "srun", R"(#!/bin/bash
sig="${STUB_SIGNAL:-USR1}"
trap 'echo forwarded >>"${STUB_LOG}/srun.usr1"' "$sig"
printf '%s\0' "$@" >"${STUB_LOG}/srun.argv"
/usr/bin/env -0 >"${STUB_LOG}/srun.env"
if [[ "${STUB_SRUN_USR1_PARENT:-}" == 1 ]]; then
  # USR1 to the batch shell until it forwards one to us: it can only once it has recorded
  # hpc_srun_pid, and a USR1 before that is not forwarded.
  for _ in $(seq 100); do
    [[ -e "${STUB_LOG}/srun.usr1" ]] && break
    kill -"${STUB_PARENT_SIGNAL:-$sig}" "$PPID"
    sleep 0.1
  done
  # A second stop to the script, as the TERM of a requeue that the program runs itself: the
  # script does not pass it on (srun.usr1 keeps one line).
  if [[ -e "${STUB_LOG}/srun.usr1" && -n "${STUB_SECOND_SIGNAL:-}" ]]; then
    kill -"${STUB_SECOND_SIGNAL}" "$PPID"
    sleep 1
  fi
  # As hpctrain's ranks do after USR1: checkpoint written, the requeue marker (unless
  # STUB_SRUN_MARKER=0), stopped for a requeue (STUB_SRUN_STATUS, default 75).
  if [[ -e "${STUB_LOG}/srun.usr1" ]]; then
    if [[ "${STUB_SRUN_MARKER:-1}" == 1 ]]; then
      printf 'restart=%s step=7 checkpoint=ck\n' "${SLURM_RESTART_COUNT:-0}" \
        >"${HPCLAUNCH_REQUEUE_MARKER}.tmp"
      mv "${HPCLAUNCH_REQUEUE_MARKER}.tmp" "${HPCLAUNCH_REQUEUE_MARKER}"
    fi
    exit "${STUB_SRUN_STATUS:-75}"
  fi
fi
exit 0
)");
}

std::vector<std::string> job_env(const Sandbox& sb, const std::vector<std::string>& extra) {
  std::vector<std::string> env = {
      "PATH=" + (sb.root() / "bin").string() + ":/usr/local/bin:/usr/bin:/bin",
      "HOME=" + (sb.root() / "home").string(),
      "STUB_LOG=" + (sb.root() / "log").string(),
      "SLURM_JOB_ID=4242",
      "SLURM_JOB_NODELIST=node[01-02]",
      "SLURM_CPUS_PER_TASK=8",
      "SLURM_JOB_NUM_NODES=2",
      "LC_ALL=C.UTF-8"};
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

Run run_job_script(const Sandbox& sb, const std::string& script,
                   const std::vector<std::string>& extra_env) {
  return spawn({"/bin/bash", script}, sb.work(), job_env(sb, extra_env), std::chrono::seconds(30));
}

std::vector<std::vector<std::string>> sbatch_directive_args(const std::string& script) {
  std::vector<std::vector<std::string>> out;
  for (const auto& line : split_lines(script)) {
    size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos) continue;     // blank
    if (line[first] != '#') break;                // first command: sbatch stops reading
    if (line.rfind("#SBATCH", 0) != 0) continue;  // an ordinary comment
    std::vector<std::string> args;
    std::string rest = line.substr(7), arg;
    bool in_arg = false, escape = false;
    char quote = 0;
    for (char c : rest) {
      if (escape) {
        arg += c;
        escape = false;
        in_arg = true;
      } else if (c == '\\') {
        escape = true;
        in_arg = true;
      } else if (quote) {
        if (c == quote)
          quote = 0;
        else
          arg += c;
      } else if (c == '\'' || c == '"') {
        quote = c;
        in_arg = true;
      } else if (c == '#') {
        break;
      } else if (std::isspace(static_cast<unsigned char>(c))) {
        if (in_arg) args.push_back(arg);
        arg.clear();
        in_arg = false;
      } else {
        arg += c;
        in_arg = true;
      }
    }
    if (in_arg) args.push_back(arg);
    out.push_back(args);
  }
  return out;
}

std::map<std::string, std::string> sbatch_options(const std::string& script) {
  std::map<std::string, std::string> opts;
  for (const auto& args : sbatch_directive_args(script)) {
    for (const auto& a : args) {
      size_t eq = a.find('=');
      if (eq == std::string::npos)
        opts[a] = "";
      else
        opts[a.substr(0, eq)] = a.substr(eq + 1);
    }
  }
  return opts;
}

std::vector<std::string> canaries(const Sandbox& sb) {
  std::vector<std::string> found;
  fs::path keep = sb.work() / "CANARY_DIR";
  for (auto it = fs::recursive_directory_iterator(sb.root());
       it != fs::recursive_directory_iterator(); ++it) {
    const fs::path& p = it->path();
    if (p == keep || p.parent_path() == keep) continue;
    if (p.filename().string().find("CANARY") != std::string::npos) found.push_back(p.string());
  }
  return found;
}

std::vector<std::string> srun_argv(const Sandbox& sb) {
  return split_nul(read_file(sb.root() / "log" / "srun.argv"));
}

std::map<std::string, std::string> srun_env(const Sandbox& sb) {
  std::map<std::string, std::string> env;
  for (const auto& entry : split_nul(read_file(sb.root() / "log" / "srun.env"))) {
    size_t eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return env;
}

std::vector<std::vector<std::string>> module_calls(const Sandbox& sb) {
  std::vector<std::vector<std::string>> calls;
  for (int i = 0;; ++i) {
    fs::path f = sb.root() / "log" / ("module." + std::to_string(i));
    if (!fs::exists(f)) break;
    calls.push_back(split_nul(read_file(f)));
  }
  return calls;
}

}  // namespace cli_test
