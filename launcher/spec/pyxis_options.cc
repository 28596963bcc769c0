#include "spec/pyxis_options.h"

#include <algorithm>

namespace hpc {
namespace {

// Pyxis's SPANK options (args.c's spank_opts) and srun's own names among them.
const char* const kNames[] = {
    "container",  // srun: an OCI bundle (Slurm 21.08+)
    "container-entrypoint",
    "container-entrypoint-log",
    "container-env",
    "container-id",  // srun: an OCI container's id (later Slurm releases)
    "container-image",
    "container-mount-home",
    "container-mounts",
    "container-name",
    "container-readonly",
    "container-remap-root",
    "container-save",
    "container-workdir",
    "container-writable",
    "no-container-entrypoint",
    "no-container-mount-home",
    "no-container-remap-root",
};

}  // namespace

PyxisOptionMatch resolve_pyxis_option(std::string_view written) {
  PyxisOptionMatch m;
  if (written.empty()) return m;
  for (const char* name : kNames) {
    const std::string_view n(name);
    if (n == written) {
      m.kind = PyxisOptionMatch::Exact;
      m.name = name;
      m.candidates.clear();
      return m;
    }
    if (n.substr(0, written.size()) == written) m.candidates.push_back(name);
  }
  if (m.candidates.size() == 1) {
    m.kind = PyxisOptionMatch::Prefix;
    m.name = m.candidates.front();
    m.candidates.clear();
  } else if (m.candidates.size() > 1) {
    m.kind = PyxisOptionMatch::Ambiguous;
  }
  return m;
}

std::string pyxis_option_key(const std::string& name) {
  if (name == "container-image" || name == "container") return "container.image";
  if (name == "container-mounts") return "container.mounts";
  if (name == "container-workdir") return "container.workdir";
  return "";
}

bool is_enroot_mount_flag(std::string_view flag) {
  static const char* const kFlags[] = {
      "ro",          "rw",          "nosuid",      "suid",         "nodev",       "dev",
      "noexec",      "exec",        "noatime",     "atime",        "nodiratime",  "diratime",
      "relatime",    "norelatime",  "strictatime", "nostrictatime", "lazytime",   "nolazytime",
      "private",     "rprivate",    "shared",      "rshared",      "slave",       "rslave",
      "unbindable",  "runbindable", "bind",        "rbind",        "nofail",      "silent",
      "loud",        "x-create=dir", "x-create=file", "x-create=auto"};
  return std::any_of(std::begin(kFlags), std::end(kFlags),
                     [&](const char* f) { return flag == f; });
}

}  // namespace hpc
