#include "render/render.h"

#include <kainjow/mustache.hpp>

#include "error.h"
#include "input_file.h"
#include "json_file.h"
#include "render/container_argv.h"
#include "shell.h"
#include "spec/suggest.h"

#include <algorithm>
#include <cctype>

namespace hpc {
namespace {

using kainjow::mustache::data;
using kainjow::mustache::mustache;

std::string directive(const std::string& option, const std::string& value) {
  return "--" + option + "=" + sbatch_quote(value);
}

std::string int_directive(const std::string& option, long long value) {
  return "--" + option + "=" + std::to_string(value);
}

data comment_lines(const std::string& text) {
  data lines{data::type::list};
  size_t start = 0;
  while (true) {
    size_t nl = text.find('\n', start);
    data line;
    line.set("text", comment_text(text.substr(start, nl - start)));
    lines << line;
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return lines;
}

data env_list(const std::vector<EnvVar>& vars, bool skip_p2p_auto) {
  data list{data::type::list};
  for (const auto& v : vars) {
    if (skip_p2p_auto && v.name == "NCCL_P2P_DISABLE" && v.value == "auto") continue;
    data item;
    item.set("name", v.name);  // validated: [A-Za-z_][A-Za-z0-9_]*
    item.set("value", v.value);
    item.set("has_reason", v.reason.empty() ? data::type::bool_false : data::type::bool_true);
    item.set("reason", comment_lines(v.reason));
    list << item;
  }
  return list;
}

data string_list(const std::vector<std::string>& items, const std::string& key) {
  data list{data::type::list};
  for (const auto& s : items) {
    data item;
    item.set(key, s);
    list << item;
  }
  return list;
}

// kainjow/mustache 4.1 drops a standalone closing-tag line when its section renders but keeps
// the line's newline when the section is skipped (false or empty), leaving stray blank lines.
// The mustache spec drops the line in both cases. A marker after each such tag makes both
// cases print "marker\n", which is then removed. The marker contains no quote or newline, so
// removing it can never change how bash splits the script.
constexpr std::string_view kLineDropMarker = "\x01hpclaunch:drop-line\x01";

std::string mark_standalone_closing_tags(const std::string& text) {
  std::string out;
  out.reserve(text.size() + 256);
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    size_t end = nl == std::string::npos ? text.size() : nl;
    std::string_view line(text.data() + start, end - start);
    size_t first = line.find_first_not_of(" \t");
    size_t last = line.find_last_not_of(" \t");
    bool closing_only =
        first != std::string_view::npos && line.substr(first).rfind("{{/", 0) == 0 &&
        line.find("}}", first) + 1 == last && line.find("{{", first + 2) == std::string_view::npos;
    // Drop an indented closing tag's indentation too: the whole line goes.
    out.append(closing_only ? line.substr(first) : line);
    if (closing_only && nl != std::string::npos) out.append(kLineDropMarker);
    if (nl != std::string::npos) out += '\n';
    start = nl == std::string::npos ? text.size() : nl + 1;
  }
  return out;
}

std::string remove_dropped_lines(std::string text) {
  std::string marker = std::string(kLineDropMarker) + "\n";
  std::string out;
  out.reserve(text.size());
  size_t start = 0;
  while (true) {
    size_t at = text.find(marker, start);
    if (at == std::string::npos) break;
    out.append(text, start, at - start);
    start = at + marker.size();
  }
  out.append(text, start, std::string::npos);
  return out;
}

// Every name template_data() provides, at any depth. A template naming anything else gets an
// error instead of silently rendering nothing (render_test checks the two agree).
const std::vector<std::string>& known_template_names() {
  static const std::vector<std::string> names = {"version",
                                                 "command",
                                                 "preset",
                                                 "cluster",
                                                 "strategy",
                                                 "spec_hash",
                                                 "nodes",
                                                 "gpus_per_node",
                                                 "world_size",
                                                 "has_shape_base",
                                                 "sources",
                                                 "source",
                                                 "mem_option",
                                                 "shape_base",
                                                 "sbatch",
                                                 "directive",
                                                 "has_modules",
                                                 "modules",
                                                 "is_use",
                                                 "use_dir",
                                                 "is_load",
                                                 "stage",
                                                 "name",
                                                 "module_purge",
                                                 "module_purge_command",
                                                 "module_force",
                                                 "lmod_init",
                                                 "path",
                                                 "has_venv",
                                                 "venv",
                                                 "has_conda",
                                                 "conda",
                                                 "has_env_from_submit",
                                                 "env_from_submit",
                                                 "has_setup",
                                                 "setup",
                                                 "line",
                                                 "nccl",
                                                 "value",
                                                 "has_reason",
                                                 "reason",
                                                 "text",
                                                 "p2p_auto",
                                                 "p2p_reason",
                                                 "env",
                                                 "has_ib_suffix",
                                                 "ib_suffix",
                                                 "resolve_master_addr",
                                                 "port_min",
                                                 "port_max",
                                                 "port_span",
                                                 "requeue",
                                                 "interactive",
                                                 "signal_seconds",
                                                 "signal",
                                                 "has_cpu_bind",
                                                 "cpu_bind",
                                                 "has_gpu_bind",
                                                 "gpu_bind",
                                                 "max_requeues",
                                                 "srun_wait",
                                                 "ntasks_per_node",
                                                 "cpus_per_task",
                                                 "trainer_program",
                                                 "trainer_command",
                                                 "trainer_is_train",
                                                 "trainer_args",
                                                 "train_words",
                                                 "program_words",
                                                 "arg",
                                                 "launch",
                                                 "launch_hpctrain",
                                                 "launch_srun",
                                                 "launch_torchrun",
                                                 "torchrun_command",
                                                 "torchrun_words",
                                                 "torchrun_runs_python",
                                                 "torchrun_rdzv_conf",
                                                 "cpus_per_node",
                                                 "node_check",
                                                 "node_check_margin",
                                                 "node_check_fraction",
                                                 "node_check_timeout",
                                                 "node_check_program",

                                                 "has_container",
                                                 "container_runtime",
                                                 "container_image",
                                                 "container_sets_user",
                                                 "container_wraps_program",
                                                 "container_command",
                                                 "container_command_words",
                                                 "container_gpus_auto",
                                                 "container_arguments",
                                                 "container_arguments_words",
                                                 "container_srun_options"};
  return names;
}

// Each tag's name: {{name}}, {{{name}}}, {{#name}}, {{^name}}, {{/name}}, {{&name}}, spaces
// allowed; comments ({{! }}) and delimiter changes ({{= =}}) name nothing.
void check_template_names(const std::string& text, const std::string& origin) {
  const auto& known = known_template_names();
  auto name_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
  };
  for (size_t at = text.find("{{"); at != std::string::npos; at = text.find("{{", at + 2)) {
    size_t i = at + 2;
    if (i < text.size() && text[i] == '{') ++i;
    while (i < text.size() && text[i] == ' ') ++i;
    if (i < text.size() && (text[i] == '#' || text[i] == '^' || text[i] == '/' || text[i] == '&'))
      ++i;
    while (i < text.size() && text[i] == ' ') ++i;
    size_t start = i;
    while (i < text.size() && name_char(text[i])) ++i;
    while (i < text.size() && text[i] == ' ') ++i;
    if (i == start || text.compare(i, 2, "}}") != 0) continue;  // not a name tag
    std::string name = text.substr(start, i - start);
    while (!name.empty() && name.back() == ' ') name.pop_back();
    if (name == ".") continue;
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      auto [line, column] = line_column_at(text, at);
      throw UserError(origin + ":" + std::to_string(line) + ":" + std::to_string(column),
                      "the template uses {{" + name + "}}, which hpclaunch does not provide",
                      suggest_fix(name, known, "names (docs/templates.md)"));
    }
  }
}

// Shell words inside an array's parentheses, each quoted (shell_quote), separated by spaces and
// wrapped before column 100 onto lines indented by 4 spaces. `used`: the columns the first line
// holds before the words ("  hpc_train=(").
std::string array_words(const std::vector<std::string>& words, size_t used) {
  std::string out;
  size_t column = used;
  for (const auto& w : words) {
    std::string q = shell_quote(w);
    if (!out.empty()) {
      if (column + 1 + q.size() > 98) {
        out += "\n    ";
        column = 4;
      } else {
        out += ' ';
        ++column;
      }
    }
    out += q;
    column += q.size();
  }
  return out;
}

data flag(bool b) { return b ? data::type::bool_true : data::type::bool_false; }

// The container the tasks' program runs in: the words of render/container_argv.h, each
// shell-quoted by the template ({{arg}}).
void set_container(data& d, const ContainerSpec& c) {
  ContainerArgv argv = container_argv(c);
  d.set("has_container", flag(c.enabled()));
  d.set("container_runtime", container_runtime_name(c.runtime));  // one of a fixed list
  d.set("container_image", c.image);  // the run record's container_image (docs/records.md)
  // ch-run refuses to start without $USER ("$USER not set"), which a batch job may lack.
  d.set("container_sets_user", flag(c.runtime == ContainerRuntime::Charliecloud));
  d.set("container_wraps_program", flag(argv.wraps_program()));
  d.set("container_command", string_list(argv.command, "arg"));
  d.set("container_command_words", array_words(argv.command, 16));
  d.set("container_gpus_auto", flag(argv.gpus_auto));
  d.set("container_arguments", string_list(argv.arguments, "arg"));
  d.set("container_arguments_words", array_words(argv.arguments, 17));
  d.set("container_srun_options", string_list(argv.srun_options, "arg"));
}

// A path (or conda name) on the cluster as one bash word: "~/x" -> "${HOME}"/'x' (the home
// directory where the job runs, not where hpclaunch ran), anything else shell-quoted. The spec
// refused "~user", $ and control characters. `relative_dot`: a relative path gets "./", so that
// one starting with '-' is never read as an option (`source -x/bin/activate`).
std::string cluster_path_word(const std::string& path, bool relative_dot) {
  if (path == "~") return "\"${HOME}\"";
  if (path.rfind("~/", 0) == 0) return "\"${HOME}\"/" + shell_quote(path.substr(2));
  if (relative_dot && !path.empty() && path[0] != '/') return shell_quote("./" + path);
  return shell_quote(path);
}

// profile.modules as the template's list: "NAME" loads a module; "use:DIR" adds a module path
// (`module use DIR`; "use:$VAR" / "use:${VAR}" a path the site keeps in a variable, as JSC's
// $OTHERSTAGES, expanded when the job runs). A stage ("Stages/2024") that fails to load gets
// the hint that a retired one needs `module use $OTHERSTAGES` first.
data module_list(const std::vector<std::string>& modules) {
  data list{data::type::list};
  for (const auto& m : modules) {
    data item;
    item.set("name", m);
    if (m.rfind("use:", 0) == 0) {
      std::string dir = m.substr(4);
      std::string var = dir.size() > 1 && dir[0] == '$' ? dir.substr(1) : "";
      if (var.size() > 2 && var.front() == '{' && var.back() == '}')
        var = var.substr(1, var.size() - 2);
      item.set("is_use", true);
      item.set("use_dir", is_env_name(var) ? "\"${" + var + "}\"" : cluster_path_word(dir, false));
    } else {
      item.set("is_load", true);
      if (m.rfind("Stages/", 0) == 0) item.set("stage", true);
    }
    list << item;
  }
  return list;
}

// Modules, the Python environment and the variables passed from the submitting shell.
void set_site_env(data& d, const Spec& spec) {
  const auto& p = spec.profile;
  // A purge alone (modules removed in a layer above) still runs: the job starts from the site's
  // bare module set.
  d.set("has_modules", flag(!p.modules.empty() || p.module_purge != ModulePurge::None));
  d.set("modules", module_list(p.modules));
  d.set("module_purge", flag(p.module_purge != ModulePurge::None));
  d.set("module_force", flag(p.module_purge == ModulePurge::Force));
  d.set("module_purge_command", p.module_purge == ModulePurge::Force ? "--force purge" : "purge");
  data inits{data::type::list};
  if (!p.lmod_init.empty()) {
    data item;
    item.set("path", cluster_path_word(p.lmod_init, true));
    inits << item;
  }
  d.set("lmod_init", inits);
  d.set("has_venv", flag(!p.python.venv.empty()));
  d.set("venv", cluster_path_word(p.python.venv, true));
  d.set("has_conda", flag(!p.python.conda.empty()));
  d.set("conda", cluster_path_word(p.python.conda, false));  // a name, or a path
  d.set("has_env_from_submit", flag(!spec.job.env_from_submit.empty()));
  data names{data::type::list};
  for (const auto& n : spec.job.env_from_submit) {
    data item;
    item.set("name", n);  // validated: [A-Za-z_][A-Za-z0-9_]*
    names << item;
  }
  d.set("env_from_submit", names);
}

data template_data(const Spec& spec, const RenderContext& ctx) {
  const auto& p = spec.profile;
  data d;
  d.set("version", comment_text(ctx.version));
  d.set("command", comment_command_line(ctx.command));
  d.set("preset", comment_text(spec.preset));
  d.set("cluster", comment_text(spec.cluster));
  d.set("strategy", spec.strategy);  // one of known_strategies()
  d.set("spec_hash", spec.hash());
  d.set("nodes", std::to_string(spec.shape.nodes));
  d.set("gpus_per_node", std::to_string(spec.shape.gpus_per_node));
  d.set("world_size", std::to_string(spec.world_size()));
  if (!spec.shape.by_name_base.empty()) {
    d.set("has_shape_base", true);
    d.set("shape_base", comment_text(spec.shape.by_name_base));
  }

  data sbatch{data::type::list};
  // The memory variables Slurm sets for what this job asks; the others, found in the job, came
  // from an allocation it was submitted in by hand.
  static const std::string kMemoryOptions[] = {"--mem-per-cpu=", "--mem-per-gpu=", "--mem="};
  const std::vector<std::string> directives = sbatch_directives(spec);
  for (const auto& line : directives) {
    data item;
    item.set("directive", line);
    sbatch << item;
  }
  d.set("sbatch", sbatch);
  // The job's own memory request (one option at most): hpc_job_start unsets the other memory
  // variables, which came from an allocation the job was submitted from.
  std::string mem_option = "--no-mem";
  for (const auto& option : kMemoryOptions) {
    for (const auto& line : directives)
      if (line.rfind(option, 0) == 0) mem_option = option.substr(0, option.size() - 1);
  }
  d.set("mem_option", mem_option);  // one of kMemoryOptions without '=', or --no-mem
  data sources{data::type::list};
  for (const auto& layer : spec.layers) {
    data item;
    item.set("source", comment_text(layer));
    sources << item;
  }
  d.set("sources", sources);

  set_site_env(d, spec);
  d.set("has_setup", flag(!p.setup.empty()));
  d.set("setup", string_list(p.setup, "line"));

  bool p2p_auto = false;
  std::string p2p_reason;
  for (const auto& v : p.nccl) {
    if (v.name == "NCCL_P2P_DISABLE" && v.value == "auto") {
      p2p_auto = true;
      p2p_reason = v.reason;
    }
  }
  d.set("p2p_reason", p2p_reason.empty() ? data{data::type::list} : comment_lines(p2p_reason));
  d.set("nccl", env_list(p.nccl, true));
  d.set("p2p_auto", flag(p2p_auto));
  d.set("env", env_list(p.env, false));

  d.set("has_ib_suffix", flag(!p.ib_suffix.empty()));
  d.set("ib_suffix", p.ib_suffix);
  d.set("resolve_master_addr", flag(p.resolve_master_addr));
  d.set("port_min", std::to_string(p.port_min));
  d.set("port_max", std::to_string(p.port_max));
  d.set("port_span", std::to_string(p.port_max - p.port_min + 1));

  // An interactive shell is not requeued: salloc has no --requeue, and no step checkpoints.
  d.set("requeue", flag(spec.job.signal_seconds > 0 && !ctx.interactive));
  d.set("interactive", flag(ctx.interactive));
  d.set("signal_seconds", std::to_string(spec.job.signal_seconds));
  d.set("signal", spec.job.signal);  // one of known_warning_signals()
  // Checked against srun's grammar (spec/binding.h): letters, digits, ':', ',', '*', '_'.
  d.set("has_cpu_bind", flag(!p.cpu_bind.empty()));
  d.set("cpu_bind", p.cpu_bind);
  d.set("has_gpu_bind", flag(!p.gpu_bind.empty()));
  d.set("gpu_bind", p.gpu_bind);
  d.set("max_requeues", std::to_string(spec.job.max_requeues));
  d.set("srun_wait", std::to_string(spec.job.srun_wait));
  d.set("ntasks_per_node", std::to_string(spec.shape.gpus_per_node));
  d.set("cpus_per_task", std::to_string(spec.shape.cpus_per_gpu));

  // job.preflight (docs/node-check.md): not in an interactive shell, which trains nothing.
  const NodeCheck& check = spec.job.node_check;
  d.set("node_check", flag(check.enabled && !ctx.interactive));
  d.set("node_check_margin", std::to_string(check.margin_percent));
  // 1..99 percent as hpctrain's --margin: 0.01..0.99.
  d.set("node_check_fraction", std::string(check.margin_percent < 10 ? "0.0" : "0.") +
                                   std::to_string(check.margin_percent));
  d.set("node_check_timeout", std::to_string(check.timeout_s));
  d.set("node_check_program", !check.hpctrain.empty()     ? check.hpctrain
                              : spec.launch == "hpctrain" ? spec.trainer.program
                                                          : std::string("hpctrain"));

  d.set("trainer_program", spec.trainer.program);
  d.set("trainer_command", spec.trainer.command);  // one of known_trainer_commands()
  d.set("trainer_is_train", flag(spec.trainer.command == "train"));
  d.set("trainer_args", string_list(spec.trainer.args, "arg"));
  // The built-in template's arrays, each a line of quoted words (array_words).
  std::vector<std::string> train{spec.trainer.program, spec.trainer.command};
  if (spec.trainer.command == "train") train.insert(train.end(), {"--strategy", spec.strategy});
  train.insert(train.end(), spec.trainer.args.begin(), spec.trainer.args.end());
  d.set("train_words", array_words(train, 12));
  std::vector<std::string> program_words{spec.trainer.program};
  program_words.insert(program_words.end(), spec.trainer.args.begin(), spec.trainer.args.end());
  d.set("program_words", array_words(program_words, 14));

  d.set("launch", spec.launch);  // one of known_launch_modes()
  d.set("launch_hpctrain", flag(spec.launch == "hpctrain"));
  d.set("launch_srun", flag(spec.launch == "srun"));
  d.set("launch_torchrun", flag(spec.launch == "torchrun"));
  // A --rdzv_conf of the user's torchrun.command is taken out and handed to each node's task,
  // which adds is_host to it (torchrun keeps only the last --rdzv_conf it is given).
  std::vector<std::string> torchrun_command;
  std::string rdzv_conf;
  for (size_t i = 0; i < spec.torchrun_command.size(); ++i) {
    const std::string& a = spec.torchrun_command[i];
    if ((a == "--rdzv_conf" || a == "--rdzv-conf") && i + 1 < spec.torchrun_command.size()) {
      rdzv_conf = spec.torchrun_command[++i];
    } else if (a.rfind("--rdzv_conf=", 0) == 0 || a.rfind("--rdzv-conf=", 0) == 0) {
      rdzv_conf = a.substr(a.find('=') + 1);
    } else {
      torchrun_command.push_back(a);
    }
  }
  d.set("torchrun_command", string_list(torchrun_command, "arg"));
  d.set("torchrun_words", array_words(torchrun_command, 15));
  d.set("torchrun_rdzv_conf", rdzv_conf);
  // torchrun runs a .py file with its own Python; anything else it must run as it is.
  const std::string& program = spec.trainer.program;
  d.set("torchrun_runs_python",
        flag(program.size() > 3 && program.compare(program.size() - 3, 3, ".py") == 0));
  d.set("cpus_per_node", std::to_string(spec.shape.cpus_per_gpu * spec.shape.gpus_per_node));
  set_container(d, spec.container);
  return d;
}

}  // namespace

std::vector<std::string> sbatch_directives(const Spec& spec) {
  const auto& s = spec.shape;
  const auto& p = spec.profile;
  const auto& j = spec.job;
  std::vector<std::string> out;
  out.push_back(directive("job-name", j.name));
  out.push_back(int_directive("nodes", s.nodes));
  // One task per GPU; under torchrun one task per node that holds all its CPUs (torchrun starts
  // the per-GPU processes), so that its srun step asks for no more than the job has.
  const bool task_per_node = spec.launch == "torchrun";
  out.push_back(int_directive("ntasks-per-node", task_per_node ? 1 : s.gpus_per_node));
  out.push_back(
      int_directive("cpus-per-task", s.cpus_per_gpu * (task_per_node ? s.gpus_per_node : 1)));
  std::string count = std::to_string(s.gpus_per_node);
  if (p.gpu_request == GpuRequest::Gres) {
    out.push_back(directive("gres", "gpu:" + (p.gpu_type.empty() ? "" : p.gpu_type + ":") + count));
  } else {
    out.push_back(directive("gpus-per-node", (p.gpu_type.empty() ? "" : p.gpu_type + ":") + count));
  }
  if (!s.mem_per_gpu.empty()) out.push_back(directive("mem-per-gpu", s.mem_per_gpu));
  out.push_back(directive("time", s.time));
  if (!p.partition.empty()) out.push_back(directive("partition", p.partition));
  if (!p.account.empty()) out.push_back(directive("account", p.account));
  if (!p.qos.empty()) out.push_back(directive("qos", p.qos));
  if (!p.constraint.empty()) out.push_back(directive("constraint", p.constraint));
  if (!p.reservation.empty()) out.push_back(directive("reservation", p.reservation));
  if (p.exclusive) out.push_back("--exclusive");
  // Validated (spec/job_features.h): digits, ',', '-', ':', '%'; job ids and Slurm's words.
  if (!j.array.empty()) out.push_back(directive("array", j.array));
  if (!j.after.empty()) out.push_back(directive("dependency", dependency_directive(j.after)));
  if (!j.mail_type.empty()) {
    std::string types;
    for (const auto& t : j.mail_type) types += (types.empty() ? "" : ",") + t;
    out.push_back(directive("mail-type", types));
  }
  if (!j.mail_user.empty()) out.push_back(directive("mail-user", j.mail_user));
  out.push_back(directive("output", j.output));
  if (!j.error.empty()) out.push_back(directive("error", j.error));
  // Appending keeps the log of every requeued run in one file.
  out.push_back("--open-mode=append");
  if (!j.chdir.empty()) out.push_back(directive("chdir", j.chdir));
  if (j.signal_seconds > 0) {
    out.push_back("--signal=B:" + j.signal + "@" + std::to_string(j.signal_seconds));
    out.push_back("--requeue");
  }
  for (const auto& extra : p.sbatch_extra) {
    auto eq = extra.find('=');
    if (eq == std::string::npos)
      out.push_back(extra);
    else
      out.push_back(extra.substr(0, eq + 1) + sbatch_quote(extra.substr(eq + 1)));
  }
  return out;
}

ScriptTemplate ScriptTemplate::from_file(const std::filesystem::path& path) {
  return from_text(read_input_file(path, "template"), path.string());
}

ScriptTemplate ScriptTemplate::from_text(std::string text, std::string origin) {
  std::string marked = mark_standalone_closing_tags(text);
  mustache probe(marked);
  if (!probe.is_valid()) {
    // kainjow reports a byte offset ("Unclosed section \"a\" at 12"); show line:column.
    std::string msg = probe.error_message();
    std::string where = origin;
    auto at = msg.rfind(" at ");
    if (at != std::string::npos &&
        msg.find_first_not_of("0123456789", at + 4) == std::string::npos && at + 4 < msg.size()) {
      size_t offset = std::stoul(msg.substr(at + 4));
      auto [line, column] = line_column_at(marked, offset);
      where += ":" + std::to_string(line) + ":" + std::to_string(column);
      msg = msg.substr(0, at);
    }
    throw UserError(
        where, "template does not parse: " + msg,
        "fix the mustache syntax (compare with the built-in templates/sbatch.sh.mustache)");
  }
  check_template_names(text, origin);
  // The job library ends with `main "$@"`: a template from before it (the whole script in one
  // file) would run nothing.
  if (text.find("main()") == std::string::npos) {
    throw UserError(origin, "the template defines no main(), which the job library calls",
                    "use a copy of this version's templates/sbatch.sh.mustache, where "
                    "the job is main() (docs/templates.md)");
  }
  ScriptTemplate t;
  t.text_ = std::move(text);
  t.origin_ = std::move(origin);
  t.compiled_ = std::make_shared<mustache>(marked);
  t.compiled_->set_custom_escape([](const std::string& s) { return shell_quote(s); });
  return t;
}

std::string ScriptTemplate::render(const Spec& spec, const RenderContext& context) const {
  mustache& tmpl = *compiled_;
  std::string out = remove_dropped_lines(tmpl.render(template_data(spec, context)));
  if (!tmpl.is_valid()) {
    throw UserError(origin_, "template failed to render: " + tmpl.error_message(),
                    "fix the template");
  }
  // The job, one blank line, then the library from its marker line on.
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  out += "\n\n";
  out += job_library_text();
  return out;
}

}  // namespace hpc
