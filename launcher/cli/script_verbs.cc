// render and validate: the script, printed or written, and checked (bash -n, shellcheck).
#include <unistd.h>

#include <fmt/core.h>
#include <CLI/CLI.hpp>
#include <re2/re2.h>
#include <filesystem>
#include <iostream>
#include <optional>
#include <vector>

#include "atomic_file.h"
#include "backends/preflight.h"
#include "cli/flags.h"
#include "cli/verbs.h"
#include "error.h"
#include "input_file.h"
#include "json_file.h"
#include "render/script_diff.h"
#include "shell.h"
#include "subprocess.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace hpc {
namespace {

// Runs a checker (bash -n, shellcheck) through the launcher's own subprocess runner; returns
// (exit status, what it printed on either stream).
std::pair<int, std::string> run_checker(const std::vector<std::string>& argv) {
  CommandResult r = run_command(argv);
  if (!r.spawn_error.empty()) return {-1, r.summary(argv.front())};
  return {r.exit_code >= 0 ? r.exit_code : 128 + r.term_signal, r.out + r.err};
}

// Who is to blame for a finding on a script line: a verbatim profile.setup line is the
// user's own shell; anything else comes from the template.
struct Blame {
  std::string where;  // template file, or the file that set profile.setup
  std::string fix;
};

Blame blame_for_line(const std::string& line_text, const Spec* spec,
                     const std::string& template_origin) {
  if (spec) {
    for (const auto& setup : spec->profile.setup) {
      if (!setup.empty() && line_text == setup) {
        auto it = spec->sources.find("profile.setup");
        std::string from =
            it == spec->sources.end() ? "profile.setup" : it->second + ": profile.setup";
        return {from, "fix that setup line (it is copied into the script verbatim)"};
      }
    }
  }
  return {template_origin, "fix the template or the value it renders there"};
}

std::string script_line(const std::string& script, long number) {
  size_t start = 0;
  for (long i = 1; i < number && start != std::string::npos; ++i) {
    start = script.find('\n', start);
    if (start != std::string::npos) ++start;
  }
  if (start == std::string::npos) return "";
  return script.substr(start, script.find('\n', start) - start);
}

// bash -n and shellcheck on a script. Throws UserError on findings, naming the script's line
// and whom to blame. SC1091 (a sourced file shellcheck cannot see here, e.g. a venv on the
// cluster) is not a finding.
std::vector<std::string> check_script(const fs::path& script, const std::string& text,
                                      const Spec* spec, const std::string& template_origin) {
  std::vector<std::string> done;
  auto report = [&](const std::string& tool, const std::string& output) {
    // "FILE:LINE:COL: level: message [SCnnnn]" (gcc format) or "FILE: line N: message" (bash)
    // RE2: linear in the line's length (the message quotes the script's line, which holds a
    // user's value).
    static const RE2 gcc(R"([^:]*:(\d{1,9}):\d+: (.*))", RE2::Latin1);
    static const RE2 bash_fmt(R"([^:]*: line (\d{1,9}): (.*))", RE2::Latin1);
    std::string first = output.substr(0, output.find('\n'));
    long number = 0;
    std::string message;
    if (RE2::FullMatch(first, gcc, &number, &message) ||
        RE2::FullMatch(first, bash_fmt, &number, &message)) {
      std::string line_text = script_line(text, number);
      Blame b = blame_for_line(line_text, spec, template_origin);
      throw UserError(b.where,
                      tool + " at script line " + std::to_string(number) + " (" +
                          comment_text(line_text) + "): " + comment_text(message),
                      b.fix);
    }
    throw UserError(template_origin, tool + ": " + comment_text(first),
                    "fix the template or the value it renders there");
  };
  auto [bash_status, bash_out] = run_checker({"bash", "-n", script.string()});
  if (bash_status != 0) report("bash -n", bash_out);
  done.push_back("bash -n");
  if (program_on_path("shellcheck")) {
    auto [sc_status, sc_out] =
        run_checker({"shellcheck", "-f", "gcc", "--exclude=SC1091", script.string()});
    if (sc_status != 0) report("shellcheck", sc_out);
    done.push_back("shellcheck");
  } else {
    done.push_back("no shellcheck (not installed)");
  }
  return done;
}

struct RenderFlags {
  SelectionFlags selection;
  std::string output, spec_out;
  std::string diff_with;  // --diff FILE
};

// render --diff FILE: the job parts of FILE and of this render, as a unified diff on stdout.
void print_job_diff(const std::string& file, const std::string& script) {
  const std::string old_script = read_input_file(file, "--diff");
  const std::string diff = job_diff(old_script, file, script, "this render");
  if (diff.empty())
    std::cout << "hpclaunch: " << file << " runs the same job (nothing differs above the job "
              << "library)\n";
  std::cout << diff;
  if (!same_job_library(old_script, script))
    std::cout << "hpclaunch: the job libraries differ too: " << file
              << " was rendered by another version of hpclaunch (diff the whole files)\n";
}

int run_render(const RenderFlags& f, const Invocation& in) {
  Rendered r = render_selection(f.selection, in.trainer_args, in.command);
  // Check both destinations before writing either, so a bad path leaves nothing behind.
  std::vector<OutputKind> kinds;
  for (const auto& path : {f.output, f.spec_out}) {
    if (path.empty()) continue;
    fs::path parent = fs::path(path).parent_path();
    std::error_code ec;
    if (!parent.empty() && fs::exists(parent, ec) && !fs::is_directory(parent, ec)) {
      throw UserError(path, "cannot write output: " + parent.string() + " is not a directory",
                      "choose a path inside a directory");
    }
    if (!parent.empty() && !fs::is_directory(parent, ec)) {
      throw UserError(path, "cannot write output: directory " + parent.string() + " does not exist",
                      "create it first");
    }
    kinds.push_back(output_kind(path));  // a directory, FIFO, socket, block device or link: refused
  }
  // One file for both would keep only the second (a device such as /dev/null may take both).
  if (kinds.size() == 2 && (kinds[0] == OutputKind::kNew || kinds[0] == OutputKind::kRegular) &&
      fs::path(f.output).lexically_normal() == fs::path(f.spec_out).lexically_normal()) {
    throw UserError("--spec-out", "names the same file as -o (" + f.output + ")",
                    "give the spec its own path");
  }
  // Both staged (temp files written) before either is committed: both or neither.
  std::optional<StagedOutput> script_file, spec_file;
  if (!f.output.empty()) script_file.emplace(f.output, r.script, 0755);
  if (!f.spec_out.empty()) spec_file.emplace(f.spec_out, r.spec.canonical_json());
  if (script_file) script_file->commit();
  if (spec_file) spec_file->commit();
  if (!f.diff_with.empty()) {
    print_job_diff(f.diff_with, r.script);
    if (f.output.empty()) return 0;
  }
  if (f.output.empty()) {
    std::cout << r.script;
  } else {
    std::cerr << "hpclaunch: wrote " << f.output << " (" << r.spec.preset << " on "
              << r.spec.cluster << ", " << r.spec.world_size() << " ranks, "
              << (r.spec.launches_hpctrain() ? r.spec.strategy : r.spec.how_launched()) << ")\n";
  }
  return 0;
}

struct ValidateFlags {
  SelectionFlags selection;
  std::string script_file;
  bool as_json = false;
  bool live = false;
  BackendChoice login;  // --live: where Slurm's commands run (this machine, or --host)
};

// validate --live: the spec and script against what the cluster says (backends/preflight.h).
// Each mismatch one line on stdout; 2 when there is any.
int report_live(const Rendered& r, const ValidateFlags& f) {
  auto host = make_login_host(f.login);
  PreflightReport report = preflight_live(*host, r.spec, r.script);
  std::cout << "preflight on " << host->name() << ": asked";
  for (const auto& c : report.checked) std::cout << " [" << c << "]";
  std::cout << "\n";
  for (const auto& s : report.skipped) std::cout << "skipped: " << s << "\n";
  for (const auto& m : report.findings)
    std::cout << "mismatch (" << m.kind << "): " << m.line() << "\n";
  if (report.findings.empty()) {
    std::cout << "ok: the cluster would accept this job\n";
    return 0;
  }
  std::cerr << "hpclaunch: error: preflight on " << host->name() << ": " << report.findings.size()
            << " mismatch" << (report.findings.size() == 1 ? "" : "es")
            << " between the spec and the cluster (listed above); fix them, nothing was submitted"
            << std::endl;
  return kExitUsage;
}

int run_validate(const ValidateFlags& f, const Invocation& in) {
  if (!f.script_file.empty()) {
    // Read first: a FIFO, a directory or a dangling link is named as such.
    auto checks = check_script(f.script_file, read_input_file(f.script_file, "script file"),
                               nullptr, f.script_file);
    std::cout << "ok: " << f.script_file;
    for (const auto& c : checks) std::cout << ", " << c;
    std::cout << "\n";
    return 0;
  }
  Rendered r = render_selection(f.selection, in.trainer_args, in.command);
  char tmpl[] = "/tmp/hpclaunch-validate-XXXXXX";
  int fd = mkstemp(tmpl);
  if (fd < 0) throw std::runtime_error("cannot create a temp file in /tmp");
  close(fd);
  std::vector<std::string> checks;
  try {
    write_file_atomically(tmpl, r.script, 0600);
    checks = check_script(tmpl, r.script, &r.spec, r.template_origin);
  } catch (...) {
    unlink(tmpl);
    throw;
  }
  unlink(tmpl);
  if (f.as_json) {
    std::cout << json{{"spec", r.spec.resolved},
                      {"sources", r.spec.sources},
                      {"files", r.spec.files},
                      {"hash", r.spec.hash()}}
                     .dump(2)
              << "\n";
    return 0;
  }
  auto plural = [](int n, const char* word) {
    return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
  };
  std::cout << fmt::format(
      "ok: preset {} on cluster {}, {}: {} x {} = {}\n", r.spec.preset, r.spec.cluster,
      r.spec.how_launched(), plural(r.spec.shape.nodes, "node"),
      plural(r.spec.shape.gpus_per_node, "GPU"), plural(r.spec.world_size(), "rank"));
  std::cout << "spec sha256 " << r.spec.hash() << " from:";
  for (const auto& file : r.spec.files) std::cout << " " << file;
  std::cout << "\nscript: " << r.template_origin;
  std::cout << " passes";
  for (size_t i = 0; i < checks.size(); ++i) std::cout << (i ? ", " : " ") << checks[i];
  std::cout << "\n";
  return f.live ? report_live(r, f) : 0;
}

}  // namespace

VerbHandler define_render(CLI::App* verb) {
  auto f = std::make_shared<RenderFlags>();
  f->selection.add_to(verb);
  verb->add_option("-o,--output", f->output,
                   "write the script here (atomically) instead of stdout");
  verb->add_option("--spec-out", f->spec_out, "also write the resolved spec (JSON) here");
  verb->add_option("--diff", f->diff_with,
                   "show what differs between the job of FILE (a script rendered before) and "
                   "this one, instead of printing the script")
      ->type_name("FILE");
  verb->footer(
      "Example: hpclaunch render --preset 1n2g --strategy ddp -o job.sbatch -- --model tiny "
      "--max-steps 5\n"
      "         hpclaunch render --preset 2n4g --strategy ddp --diff job.sbatch");
  return [f](const Invocation& in) { return run_render(*f, in); };
}

VerbHandler define_validate(CLI::App* verb) {
  auto f = std::make_shared<ValidateFlags>();
  f->selection.add_to(verb);
  verb->add_option("--script", f->script_file, "check this script file instead of rendering one");
  verb->add_flag("--json", f->as_json, "print the resolved spec as JSON");
  verb->add_flag("--live", f->live,
                 "also ask the cluster (scontrol, sinfo, sacctmgr, sbatch --test-only) on this "
                 "machine or on --host; exit 2 on any mismatch");
  verb->add_option("--host", f->login.host, "--live over SSH on this login node");
  verb->add_option("--jump", f->login.jump, "--live: reach --host through these jump hosts");
  verb->add_option("--ssh-config", f->login.ssh_config, "SSH config file (default ~/.ssh/config)");
  verb->add_option("--known-hosts", f->login.known_hosts,
                   "known_hosts file (default ~/.ssh/known_hosts)");
  verb->add_flag("--accept-new-host-key", f->login.accept_new_host_key,
                 "trust and record an unknown SSH host key (a changed key is always refused)");
  verb->footer("Example: hpclaunch validate --preset 2n4g --cluster jsc --live --host login1");
  return [f](const Invocation& in) {
    if (!f->live && (!f->login.host.empty() || f->login.accept_new_host_key)) {
      throw UserError("--host", "only goes with --live", "add --live, or leave --host out");
    }
    if (f->live && (f->as_json || !f->script_file.empty())) {
      throw UserError("--live", "checks a spec rendered here, in text",
                      "leave out --json and --script when you pass --live");
    }
    return run_validate(*f, in);
  };
}

}  // namespace hpc
