// Pyxis's options, read the way srun reads them. Pyxis is a SPANK plugin: srun adds its options
// (--container-image, ...) to its own table and parses the command line with getopt_long, which
// takes any unambiguous prefix of a long option ("--container-imag=x" is --container-image) and
// refuses an ambiguous one ("--container-m": --container-mounts or --container-mount-home?). An
// exact-name check alone let container.options set the image, mounts or working directory
// through a prefix (issue 35); resolving names here first does not (sbatch_long_options.h does
// the same for sbatch).
//
// The table is pyxis's spank_opts (NVIDIA/pyxis, args.c: the 15 options of the releases with
// --container-env) and the srun options that share their first words: --container (an OCI
// bundle; srun 22.05 lists it) and --container-id (later Slurm releases). A prefix shorter than
// those names matches several options, and so is ambiguous in srun's full table too; srun's
// other options are left to srun.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hpc {

struct PyxisOptionMatch {
  enum Kind { Exact, Prefix, Ambiguous, Unknown } kind = Unknown;
  std::string name;                      // Exact and Prefix: the option it is ("container-image")
  std::vector<std::string> candidates;   // Ambiguous: the names the prefix could mean
};

// `written` without the leading "--" and without "=value": what srun's getopt_long makes of it
// among the names above. Unknown: not a pyxis option nor a prefix of one (srun's own, or another
// plugin's).
PyxisOptionMatch resolve_pyxis_option(std::string_view written);

// The options hpclaunch renders itself from the spec, and the key that sets each:
// container-image (container.image), container-mounts (container.mounts), container-workdir
// (container.workdir), and srun's container (an OCI bundle instead of pyxis's image:
// container.image). "" for any other name.
std::string pyxis_option_key(const std::string& name);

// enroot's mount flags that a bind mount takes (pyxis passes SRC:DST:FLAGS to enroot, '+' for
// ','): read-only and propagation, nosuid/nodev/noexec and their opposites, the atime family,
// bind/rbind, nofail, silent/loud, x-create=dir|file|auto. Not remount, x-move or x-detach (they
// are not a bind mount), nor what enroot would hand to mount(2) as file-system data.
bool is_enroot_mount_flag(std::string_view flag);

}  // namespace hpc
