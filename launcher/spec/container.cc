#include "spec/container.h"

#include <filesystem>

#include "error.h"
#include "shell.h"
#include "spec/pyxis_options.h"
#include "spec/suggest.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace hpc {
namespace {

using WhereFn = std::function<std::string(const std::string&)>;

std::string in_quotes(const std::string& s) { return "\"" + comment_text(s) + "\""; }

// Each of the container's words ends up quoted in the script; a control character would still
// split a reviewer's view of it over lines, so none is accepted.
void refuse_control_chars(const std::string& value, const std::string& where) {
  if (has_control_chars(value)) {
    throw UserError(where, in_quotes(value) + " contains a newline or control character",
                    "remove it");
  }
}

ContainerRuntime runtime_from_name(const std::string& name, const std::string& where) {
  if (name == "apptainer") return ContainerRuntime::Apptainer;
  if (name == "singularity") return ContainerRuntime::Singularity;
  if (name == "pyxis") return ContainerRuntime::Pyxis;
  if (name == "charliecloud") return ContainerRuntime::Charliecloud;
  throw UserError(where, "unknown container runtime " + in_quotes(name),
                  suggest_fix(name, known_container_runtimes(), "runtimes"));
}

// An absolute path without the characters the runtimes split a mount on: ':' (SRC:DST:FLAGS)
// and ',' (Apptainer's --bind and Pyxis's --container-mounts take comma-separated lists).
void check_mount_path(const std::string& path, const std::string& what, const std::string& entry,
                      const std::string& where) {
  if (path.empty() || path[0] != '/') {
    throw UserError(where,
                    "mount " + in_quotes(entry) + ": the " + what + " " + in_quotes(path) +
                        " is not an absolute path",
                    "write SRC:DST with both paths absolute, e.g. \"/scratch/data:/data\"");
  }
  if (path.find(',') != std::string::npos) {
    throw UserError(where, "mount " + in_quotes(entry) + ": the " + what + " holds a ','",
                    "use a parent directory without ',' (the runtimes split mount lists there)");
  }
}

void check_mount_flags(ContainerRuntime runtime, const ContainerMount& m, const std::string& entry,
                       const std::string& where) {
  if (m.flags.empty()) return;
  switch (runtime) {
    case ContainerRuntime::Apptainer:
    case ContainerRuntime::Singularity:
      if (m.flags != "ro" && m.flags != "rw") {
        throw UserError(where, "mount " + in_quotes(entry) + ": unknown flag " + in_quotes(m.flags),
                        "use ro or rw (Apptainer's bind flags)");
      }
      return;
    case ContainerRuntime::Pyxis:
      // Each flag reaches enroot's fstab line; one it does not know becomes mount(2) data.
      for (size_t start = 0; start <= m.flags.size();) {
        size_t plus = m.flags.find('+', start);
        if (plus == std::string::npos) plus = m.flags.size();
        const std::string flag = m.flags.substr(start, plus - start);
        if (!is_enroot_mount_flag(flag)) {
          throw UserError(where,
                          "mount " + in_quotes(entry) + ": " + in_quotes(flag) +
                              " is not an enroot mount flag",
                          "write flags such as ro, nosuid, rprivate or x-create=dir joined with "
                          "'+', e.g. \"/data:/data:ro+rprivate\" (docs/programs.md#containers)");
        }
        start = plus + 1;
      }
      return;
    case ContainerRuntime::Charliecloud:
      throw UserError(where, "mount " + in_quotes(entry) + ": ch-run's --bind takes no flags",
                      "write SRC:DST (Charliecloud binds read-write)");
    case ContainerRuntime::None:
      return;
  }
}

ContainerMount parse_mount(ContainerRuntime runtime, const std::string& entry,
                           const std::string& where) {
  refuse_control_chars(entry, where);
  const size_t first = entry.find(':');
  if (first == std::string::npos) {
    throw UserError(where, "mount " + in_quotes(entry) + " has no ':'",
                    "write SRC:DST (the host path, then where the program sees it), e.g. "
                    "\"/scratch/data:/data\"");
  }
  ContainerMount m;
  m.source = entry.substr(0, first);
  const size_t second = entry.find(':', first + 1);
  m.target = entry.substr(first + 1, second == std::string::npos ? second : second - first - 1);
  if (second != std::string::npos) {
    m.flags = entry.substr(second + 1);
    if (m.flags.find(':') != std::string::npos) {
      throw UserError(where, "mount " + in_quotes(entry) + " has more than SRC:DST:FLAGS",
                      "use a parent directory without ':' (the runtimes split a mount there)");
    }
    if (m.flags.empty()) {
      throw UserError(where, "mount " + in_quotes(entry) + " ends with ':'",
                      "write SRC:DST, or SRC:DST:FLAGS");
    }
  }
  check_mount_path(m.source, "source", entry, where);
  check_mount_path(m.target, "target", entry, where);
  check_mount_flags(runtime, m, entry, where);
  return m;
}

// Options are placed as given, before the image (Apptainer, Charliecloud) or among srun's
// options (Pyxis). A first word that is not an option would be taken for the image or the
// program; the keys hpclaunch renders itself are refused so that the script says one thing.
void check_options(const ContainerSpec& c, const std::string& where) {
  for (const auto& o : c.options) refuse_control_chars(o, where);
  if (!c.options.empty() && (c.options.front().empty() || c.options.front()[0] != '-')) {
    throw UserError(
        where, "the first option " + in_quotes(c.options.front()) + " does not start with '-'",
        "write the runtime's options, e.g. [\"--writable-tmpfs\"]; an option's value may "
        "follow it as the next entry");
  }
  if (c.runtime != ContainerRuntime::Pyxis) return;
  // srun reads these words with getopt_long: a unique prefix is the option, an ambiguous one an
  // error (pyxis_options.h).
  for (const auto& o : c.options) {
    if (o.rfind("--", 0) != 0) continue;  // a value, or a short option: not pyxis's
    const size_t eq = o.find('=');
    const std::string written = o.substr(2, eq == std::string::npos ? eq : eq - 2);
    const PyxisOptionMatch m = resolve_pyxis_option(written);
    if (m.kind == PyxisOptionMatch::Ambiguous) {
      std::string names;
      for (const auto& n : m.candidates) names += (names.empty() ? "--" : ", --") + n;
      throw UserError(where,
                      "--" + comment_text(written) + " is ambiguous for srun (" + names + ")",
                      "write the option's full name");
    }
    const std::string key = pyxis_option_key(m.name);
    if (key.empty()) continue;
    const std::string as =
        m.kind == PyxisOptionMatch::Prefix
            ? "--" + comment_text(written) + " (srun reads it as --" + m.name + ")"
            : "--" + m.name;
    throw UserError(where, as + " is rendered from " + key, "set " + key + " instead");
  }
}

ContainerGpus read_gpus(const json& c, ContainerRuntime runtime, const std::string& where) {
  if (!c.contains("gpus") || c["gpus"].is_null()) return ContainerGpus::Auto;
  const json& v = c["gpus"];
  ContainerGpus gpus = ContainerGpus::Auto;
  if (v.is_boolean()) {
    gpus = v.get<bool>() ? ContainerGpus::On : ContainerGpus::Off;
  } else if (!v.is_string() || v.get<std::string>() != "auto") {
    throw UserError(where, "expected \"auto\", true or false, got " + v.dump(),
                    "write \"auto\" (--nv where the node has nvidia-smi), true or false");
  }
  const bool apptainer =
      runtime == ContainerRuntime::Apptainer || runtime == ContainerRuntime::Singularity;
  if (gpus != ContainerGpus::Auto && !apptainer) {
    throw UserError(
        where, container_runtime_name(runtime) + " takes no GPU flag",
        runtime == ContainerRuntime::Pyxis
            ? "remove it: enroot's NVIDIA hook brings the job's GPUs into the container"
            : "remove it: give the image the host's driver once with ch-fromhost --nvidia IMAGE");
  }
  return gpus;
}

std::string string_at(const json& c, const std::string& key) {
  return c.contains(key) && c[key].is_string() ? c[key].get<std::string>() : "";
}

std::vector<std::string> strings_at(const json& c, const std::string& key) {
  return c.contains(key) && c[key].is_array() ? c[key].get<std::vector<std::string>>()
                                              : std::vector<std::string>{};
}

}  // namespace

const std::vector<std::string>& known_container_runtimes() {
  static const std::vector<std::string> names = {"apptainer", "singularity", "pyxis",
                                                 "charliecloud"};
  return names;
}

std::string container_runtime_name(ContainerRuntime runtime) {
  switch (runtime) {
    case ContainerRuntime::Apptainer:
      return "apptainer";
    case ContainerRuntime::Singularity:
      return "singularity";
    case ContainerRuntime::Pyxis:
      return "pyxis";
    case ContainerRuntime::Charliecloud:
      return "charliecloud";
    case ContainerRuntime::None:
      return "none";
  }
  return "none";
}

ContainerSpec read_container(const json& doc, const WhereFn& where) {
  ContainerSpec c;
  if (!doc.contains("container") || !doc["container"].is_object()) return c;
  const json& block = doc["container"];
  const std::string runtime = string_at(block, "runtime");
  if (runtime.empty()) {
    for (const auto& [key, value] : block.items()) {
      if (value.is_null()) continue;
      throw UserError(where("container." + key), "is set, but container.runtime is not",
                      "add --set container.runtime=apptainer (or singularity, pyxis, "
                      "charliecloud), or remove the container key");
    }
    return c;
  }
  c.runtime = runtime_from_name(runtime, where("container.runtime"));
  c.image = string_at(block, "image");
  const std::string image_where = where("container.image");
  if (c.image.empty()) {
    throw UserError(image_where, "is empty",
                    "name the image: --container IMAGE or --set container.image=IMAGE");
  }
  refuse_control_chars(c.image, image_where);
  if (c.image[0] == '-') {
    throw UserError(image_where, in_quotes(c.image) + " starts with '-'",
                    "write a path (./image.sif) or a URI; an option belongs in "
                    "container.options");
  }
  for (const auto& entry : strings_at(block, "mounts"))
    c.mounts.push_back(parse_mount(c.runtime, entry, where("container.mounts")));
  c.options = strings_at(block, "options");
  check_options(c, where("container.options"));
  c.workdir = string_at(block, "workdir");
  if (!c.workdir.empty()) {
    refuse_control_chars(c.workdir, where("container.workdir"));
    if (c.workdir[0] != '/') {
      throw UserError(where("container.workdir"), in_quotes(c.workdir) + " is not an absolute path",
                      "give the directory inside the image, e.g. \"/workspace\"");
    }
  }
  c.gpus = read_gpus(block, c.runtime, where("container.gpus"));
  return c;
}

void check_container_on_this_machine(const ContainerSpec& c, const std::string& workdir) {
  if (c.runtime == ContainerRuntime::Pyxis) {
    throw UserError("container.runtime",
                    "pyxis is a plugin of Slurm's srun; the local backend "
                    "runs without Slurm",
                    "submit to a cluster whose srun has pyxis, or use apptainer or charliecloud "
                    "with --local");
  }
  if (!c.enabled()) return;
  // A URI (docker://, library://, oras://) is fetched by the runtime; a Charliecloud name
  // without '/' is an image in ch-image's storage. Anything else is a path on this machine.
  if (c.image.find("://") != std::string::npos) return;
  if (c.runtime == ContainerRuntime::Charliecloud && c.image.find('/') == std::string::npos) {
    return;
  }
  fs::path image = fs::path(workdir) / c.image;
  std::error_code ec;
  if (!fs::exists(image, ec)) {
    throw UserError("container.image",
                    "the image " + in_quotes(c.image) +
                        " does not exist on this machine (the local backend runs the tasks "
                        "here, from " +
                        comment_text(workdir) + ")",
                    "build or copy the image there, or give its absolute path");
  }
}

}  // namespace hpc
