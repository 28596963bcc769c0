#include "follow/rerun.h"

#include <filesystem>
#include <iostream>

#include "error.h"
#include "json_file.h"
#include "render/render.h"
#include "shell.h"
#include "spec/catalog.h"
#include "spec/spec.h"
#include "version.h"

namespace fs = std::filesystem;

namespace hpc {

RunRecord find_recorded_run(const std::string& run, const std::string& runs_dir) {
  std::error_code ec;
  const std::string root = fs::absolute(runs_dir, ec).lexically_normal().string();
  std::optional<RunRecord> record = find_run(root, run);
  if (!record) {
    throw UserError(comment_text(run),
                    "no run of that job id or run directory name under " + runs_dir,
                    "hpclaunch list shows the runs; pass --runs-dir if they live elsewhere, or "
                    "the path of the run directory");
  }
  return *record;
}

namespace {

// The backend the run used, unless the command line named one.
BackendChoice rerun_backend(const RerunRequest& request, const RunRecord& record) {
  BackendChoice c = request.choice;
  if (request.backend_given) return c;
  c.kind = record.backend;
  if (c.kind == "ssh") {
    if (c.host.empty()) c.host = record.ssh_target;
    if (c.jump.empty()) c.jump = record.ssh_jump;
    if (c.ssh_config.empty()) {
      c.ssh_config = record.ssh_config;
      c.ssh_config_from_record = !c.ssh_config.empty();
    }
    if (c.known_hosts.empty()) c.known_hosts = record.known_hosts;
  }
  return c;
}

}  // namespace

std::string program_change_since(const RunRecord& record, const std::string& dir) {
  if (!record.program_recorded || !record.program.in_git()) return "";
  const ProgramState now = read_program_state(dir);
  if (now.in_git() && now.work_tree != record.program.work_tree) {
    return "the run was submitted from the work tree " + record.program.work_tree +
           ", this directory is in " + now.work_tree;
  }
  return describe_program_change(record.program, now);
}

int rerun_job(const RerunRequest& request, const std::vector<std::string>& command) {
  const RunRecord record = find_recorded_run(request.run, request.choice.runs_dir);
  const fs::path spec_file = fs::path(record.local_dir) / "spec.json";
  nlohmann::json saved = read_json_file(spec_file);  // UserError names the file
  if (!saved.is_object()) {
    throw UserError(spec_file.string(),
                    std::string("is ") +
                        (saved.is_array()  ? "an array"
                         : saved.is_null() ? "null"
                                           : "not an object") +
                        ", not a spec (the JSON object hpclaunch wrote at submit)",
                    "restore the file or remove that run directory");
  }

  // The spec first: a bad --set is bad input whether or not the code changed.
  SpecRequest spec_request;
  spec_request.saved_spec = std::make_pair(std::move(saved), spec_file.string());
  spec_request.sets = request.sets;
  Catalog catalog = Catalog::from_environment();
  Spec spec = resolve_spec(catalog, spec_request);
  fs::path tmpl =
      request.template_file.empty() ? catalog.default_template() : fs::path(request.template_file);
  std::string script =
      ScriptTemplate::from_file(tmpl).render(spec, RenderContext{kVersion, command, false});

  // The saved spec as it is now against the hash the run recorded: an edited spec.json runs
  // what the edit says (its setup lines too), so it needs --force as changed code does.
  std::string spec_edit;
  if (!record.spec_hash.empty()) {
    std::string saved_hash = spec.hash();
    if (!request.sets.empty()) {
      SpecRequest as_saved = spec_request;
      as_saved.sets.clear();
      saved_hash = resolve_spec(catalog, as_saved).hash();
    }
    if (saved_hash != record.spec_hash)
      spec_edit = "the file changed since the run (sha256 " + saved_hash.substr(0, 12) +
                  ", recorded " + comment_text(record.spec_hash.substr(0, 12)) + ")";
  }
  if (!spec_edit.empty() && !request.force) {
    throw UserError(comment_text(spec_file.string()), spec_edit,
                    "pass --force to run the spec as the file now says (check it first: its setup "
                    "lines run in the job), or use --set on an unchanged copy");
  }
  check_env_from_submit(spec);  // a secret not set: one line, before anything is said

  const std::string changed = program_change_since(record, fs::current_path().string());
  const std::string where = comment_text(record.local_dir) + "/run.json: program";
  if (!changed.empty() && !request.force) {
    const fs::path diff = fs::path(record.local_dir) / "program.diff";
    std::error_code ec;
    const std::string apply =
        fs::exists(diff, ec) ? ", then git apply " + comment_text(diff.string()) : "";
    throw UserError(where, "the code changed since the run: " + comment_text(changed),
                    "pass --force to run the code as it is now, or restore it (git checkout " +
                        record.program.revision.substr(0, 12) + apply + ")");
  }
  if (!changed.empty()) {
    std::cerr << "hpclaunch: warning: " << where << ": " << comment_text(changed)
              << "; --force: running the code as it is now\n";
  }

  if (!spec_edit.empty()) {
    std::cerr << "hpclaunch: warning: " << comment_text(spec_file.string()) << ": " << spec_edit
              << "; --force: running the spec as the file says\n";
  }

  RunOptions options = request.options;
  options.rerun_of = record.local_dir;
  std::string note = "hpclaunch: rerun of " + comment_text(record.local_dir) + " (job " +
                     comment_text(record.job_id) + ")";
  if (spec.hash() == record.spec_hash) {
    note += ": the same spec (sha256 " + spec.hash().substr(0, 12) + ")";
  } else {
    note += std::string(request.sets.empty() ? "" : " with --set") + ": spec sha256 " +
            spec.hash().substr(0, 12) + " (was " + comment_text(record.spec_hash.substr(0, 12)) +
            "); hpclaunch diff shows it";
  }
  options.submitted_note = note;
  return submit_and_follow(spec, script, rerun_backend(request, record), command, options);
}

}  // namespace hpc
