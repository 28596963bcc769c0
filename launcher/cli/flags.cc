#include "cli/flags.h"

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>

#include "byte_size.h"
#include "version.h"
#include "error.h"
#include "follow/excluded_nodes.h"
#include "render/render.h"
#include "shell.h"
#include "spec/catalog.h"
#include "text.h"

namespace fs = std::filesystem;

namespace hpc {

void require_plain_numbers(CLI::App* app) {
  // CLI11 reads numbers with strtoll(base 0): "010" is 8, "0x10" 16, " 2" and "+2" are 2.
  static const CLI::Validator whole(
      [](std::string& text) -> std::string {
        if (is_plain_whole_number(text)) return "";
        return "\"" + comment_text(text) + "\" is not a whole number; " + plain_number_fix(text);
      },
      "", "plain whole number");
  static const CLI::Validator decimal(
      [](std::string& text) -> std::string {
        if (is_plain_decimal_number(text)) return "";
        return "\"" + comment_text(text) + "\" is not a number; " + plain_number_fix(text);
      },
      "", "plain decimal number");
  for (CLI::Option* option : app->get_options()) {
    const std::string type = option->get_type_name();
    if (type == "INT" || type == "UINT") option->check(whole);
    if (type == "FLOAT") option->check(decimal);
  }
  for (CLI::App* sub : app->get_subcommands([](CLI::App*) { return true; }))
    require_plain_numbers(sub);
}

void SelectionFlags::add_to(CLI::App* app) {
  app->add_option("--preset,-p", preset, "shape preset (hpclaunch presets list)");
  app->add_option("--strategy,-s", strategy, "hpctrain's strategy: ddp, fsdp, zero1 or zero2");
  app->add_option("--launch", launch,
                  "how the program starts: hpctrain (default), srun (one task per GPU runs the "
                  "command after --) or torchrun (one per node); docs/programs.md");
  app->add_option("--cluster,-c", cluster, "cluster profile (hpclaunch clusters list)");
  app->add_option("--set", sets, "override a key: --set shape.time=08:00:00 (repeatable)")
      ->take_all();
  app->add_option("--env-pass", env_pass,
                  "pass this variable of your shell to the job by name, never its value "
                  "(repeatable; adds to job.env_from_submit)");
  app->add_option("--project", project, "project file (default: ./hpclaunch.json if present)");
  app->add_flag("--no-project", no_project, "ignore ./hpclaunch.json");
  app->add_option("--template", template_file, "mustache template (default: the built-in one)");
  app->add_option("--container", container_image,
                  "run each task's program in this image (= --set container.image=IMAGE; "
                  "container.runtime says which runtime)");
  add_job_feature_flags(app);
}

void SelectionFlags::add_job_feature_flags(CLI::App* app) {
  const char* const group = "Job (per run; docs/jobs.md)";
  app->add_option("--after", after,
                  "start after job JOBID[:afterok|afterany|afternotok|after] (default afterok; "
                  "repeatable, or ids joined by ',')")
      ->allow_extra_args(false)
      ->group(group);
  app->add_option("--array", array, "a job array: 0-9, 0-15:4, 1,3,5, 0-9%2 (2 at once)")
      ->group(group);
  app->add_flag("--exclusive", exclusive, "whole nodes, shared with no other job")->group(group);
  app->add_option("--partition", partition, "profile.partition for this run")->group(group);
  app->add_option("--account", account, "profile.account for this run")->group(group);
  app->add_option("--qos", qos, "profile.qos for this run")->group(group);
  app->add_option("--constraint", constraint, "profile.constraint (node features)")->group(group);
  app->add_option("--reservation", reservation, "profile.reservation for this run")->group(group);
  app->add_option("--mail-type", mail_type, "mail on these events: END,FAIL (sbatch's words)")
      ->allow_extra_args(false)
      ->group(group);
  app->add_option("--mail-user", mail_user, "mail this address (default: you, as Slurm does)")
      ->group(group);
}

std::vector<std::pair<nlohmann::json, std::string>> SelectionFlags::flag_layers() const {
  std::vector<std::pair<nlohmann::json, std::string>> layers;
  auto add = [&](const char* flag, const char* block, const char* key, nlohmann::json value) {
    layers.emplace_back(nlohmann::json{{block, {{key, std::move(value)}}}}, flag);
  };
  if (!partition.empty()) add("--partition", "profile", "partition", partition);
  if (!account.empty()) add("--account", "profile", "account", account);
  if (!qos.empty()) add("--qos", "profile", "qos", qos);
  if (!constraint.empty()) add("--constraint", "profile", "constraint", constraint);
  if (!reservation.empty()) add("--reservation", "profile", "reservation", reservation);
  if (exclusive) add("--exclusive", "profile", "exclusive", true);
  if (!after.empty()) add("--after", "job", "after", after);
  if (!array.empty()) add("--array", "job", "array", array);
  if (!mail_type.empty()) add("--mail-type", "job", "mail_type", mail_type);
  if (!mail_user.empty()) add("--mail-user", "job", "mail_user", mail_user);
  return layers;
}

SpecRequest SelectionFlags::request(
    const std::optional<std::vector<std::string>>& trainer_args) const {
  SpecRequest r = make_spec_request(preset, cluster, strategy, sets, project, no_project);
  if (!launch.empty()) r.launch = launch;
  r.trainer_args = trainer_args;
  if (!container_image.empty()) r.container_image = container_image;
  r.env_pass = env_pass;
  r.flag_layers = flag_layers();
  return r;
}

void BackendFlags::add_to(CLI::App* app, bool submitting) {
  if (submitting) {
    app->add_option("--backend", backend, "slurm (sbatch here), ssh (--host) or local (no Slurm)")
        ->check(CLI::IsMember({"slurm", "ssh", "local"}));
    app->add_flag("--local", local, "run on this machine without Slurm (= --backend local)");
    app->add_option("--host", host,
                    "submit over SSH to this login node (host or ~/.ssh/config alias)");
    app->add_option("--jump", jump,
                    "ssh: reach --host through these jump hosts, [user@]host[:port] or aliases, "
                    "comma-separated (ssh -J; default: the config's ProxyJump; none: direct)");
    app->add_flag("--accept-new-host-key", accept_new_host_key,
                  "trust and record an unknown SSH host key (a changed key is always refused)");
    app->add_option("--remote-runs-dir", remote_runs_dir,
                    "ssh: run directories on the login node (default ~/hpclaunch-runs)");
    app->add_flag("--sync", sync,
                  "ssh: upload the working directory (git ls-files -co --exclude-standard) to "
                  "the login node, content-addressed, and run the job in that copy");
    app->add_option("--sync-list", sync_list,
                    "with --sync: a file naming the files to upload, one path a line");
    app->add_option("--sync-max-size", sync_max_size,
                    "with --sync: larger files are skipped, one line each (default 10M)");
    app->add_option("--sync-store", sync_store,
                    "with --sync: the store on the login node (default ~/.cache/hpclaunch/sync)");
  }
  app->add_option("--ssh-config", ssh_config, "SSH config file (default ~/.ssh/config)");
  app->add_option("--known-hosts", known_hosts, "known_hosts file (default ~/.ssh/known_hosts)");
  app->add_option("--runs-dir", runs_dir, "where run directories are kept (default ./runs)");
}

BackendChoice BackendFlags::choice() const {
  BackendChoice c;
  c.kind = backend;
  if (local) c.kind = "local";
  if (!host.empty() && c.kind.empty()) c.kind = "ssh";
  c.host = host;
  c.jump = jump;
  if (!jump.empty() && host.empty())
    throw UserError("--jump", "names the hops in front of a login node, and no --host was given",
                    "add --host LOGIN_NODE");
  c.ssh_config = ssh_config;
  c.known_hosts = known_hosts;
  c.accept_new_host_key = accept_new_host_key;
  c.runs_dir = runs_dir;
  c.remote_runs_dir = remote_runs_dir;
  c.sync = sync || !sync_list.empty();
  c.sync_list = sync_list;
  if (has_control_chars(sync_store))  // a newline would split the store's paths in the manifest
    throw UserError("--sync-store",
                    "\"" + comment_text(sync_store) + "\" holds a control character",
                    "name a folder on the login node without control characters");
  if (!sync_store.empty()) c.sync_store = sync_store;
  if (!sync_max_size.empty())
    c.sync_max_file_size = parse_byte_size("--sync-max-size", sync_max_size);
  if (c.sync && c.kind != "ssh")
    throw UserError("--sync", "code sync uploads to a login node over SSH",
                    "add --host LOGIN_NODE, or drop --sync (the slurm and local backends run "
                    "in this directory)");
  return c;
}

void refuse_empty_values(CLI::App* verb) {
  static const CLI::Validator not_empty(
      [](std::string& value) {
        return value.empty() ? std::string(
                                   "an empty value; give one, or leave the flag out for "
                                   "its default")
                             : std::string();
      },
      "", "NOT_EMPTY");
  for (CLI::Option* option : verb->get_options())
    if (option->nonpositional() && option->get_type_size_max() > 0) option->check(not_empty);
  for (CLI::App* sub : verb->get_subcommands({})) refuse_empty_values(sub);
}

Rendered render_selection(const SelectionFlags& flags,
                          const std::optional<std::vector<std::string>>& trainer_args,
                          const std::vector<std::string>& command, bool interactive,
                          bool exclude_remembered) {
  Catalog catalog = Catalog::from_environment();
  Rendered r;
  r.spec = resolve_spec(catalog, flags.request(trainer_args));
  if (exclude_remembered) add_remembered_exclusions(r.spec, std::cerr);
  fs::path tmpl =
      flags.template_file.empty() ? catalog.default_template() : fs::path(flags.template_file);
  ScriptTemplate t = ScriptTemplate::from_file(tmpl);
  r.template_origin = t.origin();
  if (interactive && !t.has_section("interactive")) {
    throw UserError(t.origin(),
                    "the template has no {{#interactive}} section, so hpclaunch shell would start "
                    "the program instead of a shell",
                    "add the built-in template's {{#interactive}} launch section to your copy "
                    "(templates/sbatch.sh.mustache)");
  }
  r.script = t.render(r.spec, RenderContext{kVersion, command, interactive});
  return r;
}

}  // namespace hpc
