// Flags that several verbs share: what to resolve (SelectionFlags) and where jobs go or are
// found (BackendFlags); and the spec + script that render, validate, run and submit start from.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "follow/jobs.h"
#include "spec/spec.h"

namespace CLI {
class App;
}

namespace hpc {

// Every number flag of `app` and its subcommands (INT, UINT, FLOAT) refuses what breaks the
// plain-number rule (text.h: "+2", " 2", "010", "0x10", "1e3"), as --set and JSON files do.
void require_plain_numbers(CLI::App* app);

// Flags shared by render, validate, run and submit: what to resolve.
struct SelectionFlags {
  std::string preset, cluster, strategy, launch, project, template_file;
  std::string container_image;  // --container IMAGE: container.image
  bool no_project = false;
  std::vector<std::string> sets;
  std::vector<std::string> env_pass;  // --env-pass NAME: job.env_from_submit, by name
  // Per-run sbatch features (docs/jobs.md): each becomes its spec key, checked there.
  std::vector<std::string> after, mail_type;
  std::string array, mail_user, partition, account, qos, constraint, reservation;
  bool exclusive = false;

  void add_to(CLI::App* app);
  void add_job_feature_flags(CLI::App* app);
  std::vector<std::pair<nlohmann::json, std::string>> flag_layers() const;
  SpecRequest request(const std::optional<std::vector<std::string>>& trainer_args) const;
};

// Flags that choose where jobs go (run, submit) or where to find them (status, logs, ...).
struct BackendFlags {
  std::string backend, host, jump, ssh_config, known_hosts, runs_dir = "runs",
                                                      remote_runs_dir = "~/hpclaunch-runs";
  bool local = false, accept_new_host_key = false, sync = false;
  std::string sync_list, sync_max_size, sync_store;

  void add_to(CLI::App* app, bool submitting);
  BackendChoice choice() const;
};

// Every named option of `verb` and its subcommands that takes a value refuses an empty one: an
// empty --host would submit to the local Slurm, an empty -o would print to stdout, an empty
// --strategy or --cluster would pick the default. Leaving a flag out is how to get its default.
void refuse_empty_values(CLI::App* verb);

struct Rendered {
  Spec spec;
  std::string script;
  std::string template_origin;
};

// Resolves the selection and renders it through the chosen (or built-in) template;
// `interactive`: the script of `hpclaunch shell` (RenderContext::interactive).
// `exclude_remembered`: run and submit add the slow nodes remembered for the cluster to
// --exclude (follow/excluded_nodes.h), with a note on stderr.
Rendered render_selection(const SelectionFlags& flags,
                          const std::optional<std::vector<std::string>>& trainer_args,
                          const std::vector<std::string>& command, bool interactive = false,
                          bool exclude_remembered = false);

}  // namespace hpc
