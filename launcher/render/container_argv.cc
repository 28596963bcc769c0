#include "render/container_argv.h"

namespace hpc {
namespace {

std::string mount_text(const ContainerMount& m) {
  return m.source + ":" + m.target + (m.flags.empty() ? "" : ":" + m.flags);
}

// apptainer exec [--nv] [--bind SRC:DST[:ro|rw]]... [--pwd DIR] [OPTIONS] IMAGE PROGRAM ARGS
ContainerArgv apptainer(const ContainerSpec& c, const std::string& command) {
  ContainerArgv a;
  a.command = {command, "exec"};
  a.gpus_auto = c.gpus == ContainerGpus::Auto;
  if (c.gpus == ContainerGpus::On) a.arguments.push_back("--nv");
  for (const auto& m : c.mounts) {
    a.arguments.push_back("--bind");
    a.arguments.push_back(mount_text(m));
  }
  if (!c.workdir.empty()) {
    a.arguments.push_back("--pwd");
    a.arguments.push_back(c.workdir);
  }
  a.arguments.insert(a.arguments.end(), c.options.begin(), c.options.end());
  a.arguments.push_back(c.image);
  return a;
}

// ch-run [-b SRC:DST]... [--cd DIR] [OPTIONS] IMAGE -- PROGRAM ARGS
ContainerArgv charliecloud(const ContainerSpec& c) {
  ContainerArgv a;
  a.command = {"ch-run"};
  for (const auto& m : c.mounts) {
    a.arguments.push_back("-b");
    a.arguments.push_back(mount_text(m));
  }
  if (!c.workdir.empty()) {
    a.arguments.push_back("--cd");
    a.arguments.push_back(c.workdir);
  }
  a.arguments.insert(a.arguments.end(), c.options.begin(), c.options.end());
  a.arguments.push_back(c.image);
  a.arguments.push_back("--");
  return a;
}

// srun --container-image=IMAGE [--container-mounts=SRC:DST[:FLAGS],...]
//      [--container-workdir=DIR] [OPTIONS] ... PROGRAM ARGS
ContainerArgv pyxis(const ContainerSpec& c) {
  ContainerArgv a;
  a.srun_options.push_back("--container-image=" + c.image);
  if (!c.mounts.empty()) {
    std::string list;
    for (const auto& m : c.mounts) list += (list.empty() ? "" : ",") + mount_text(m);
    a.srun_options.push_back("--container-mounts=" + list);
  }
  if (!c.workdir.empty()) a.srun_options.push_back("--container-workdir=" + c.workdir);
  a.srun_options.insert(a.srun_options.end(), c.options.begin(), c.options.end());
  return a;
}

}  // namespace

ContainerArgv container_argv(const ContainerSpec& c) {
  switch (c.runtime) {
    case ContainerRuntime::Apptainer:
      return apptainer(c, "apptainer");
    case ContainerRuntime::Singularity:
      return apptainer(c, "singularity");
    case ContainerRuntime::Charliecloud:
      return charliecloud(c);
    case ContainerRuntime::Pyxis:
      return pyxis(c);
    case ContainerRuntime::None:
      break;
  }
  return {};
}

}  // namespace hpc
