// resolve_pyxis_option: srun's getopt_long rules over pyxis's options (a unique prefix is the
// option, an ambiguous one an error), the options hpclaunch renders itself, enroot's mount flags.
#include "spec/pyxis_options.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

using hpc::PyxisOptionMatch;
using hpc::resolve_pyxis_option;

TEST_CASE("pyxis options: exact names, unique prefixes, ambiguous prefixes", "[pyxis-options]") {
  PyxisOptionMatch m = resolve_pyxis_option("container-image");
  CHECK(m.kind == PyxisOptionMatch::Exact);
  CHECK(m.name == "container-image");
  m = resolve_pyxis_option("container-imag");
  CHECK(m.kind == PyxisOptionMatch::Prefix);
  CHECK(m.name == "container-image");
  CHECK(resolve_pyxis_option("container-i").kind == PyxisOptionMatch::Ambiguous);  // -id, -image
  CHECK(resolve_pyxis_option("container-work").name == "container-workdir");
  CHECK(resolve_pyxis_option("container-wo").name == "container-workdir");
  m = resolve_pyxis_option("container-w");  // -workdir or -writable
  CHECK(m.kind == PyxisOptionMatch::Ambiguous);
  CHECK(m.candidates == std::vector<std::string>{"container-workdir", "container-writable"});
  m = resolve_pyxis_option("container-mount");  // -mount-home or -mounts
  CHECK(m.kind == PyxisOptionMatch::Ambiguous);
  CHECK(m.candidates.size() == 2);
  CHECK(resolve_pyxis_option("container-mounts").kind == PyxisOptionMatch::Exact);
  CHECK(resolve_pyxis_option("container-mo").kind == PyxisOptionMatch::Ambiguous);
  // An exact name wins over the longer names it begins: srun's own --container (OCI).
  m = resolve_pyxis_option("container");
  CHECK(m.kind == PyxisOptionMatch::Exact);
  CHECK(m.name == "container");
  CHECK(resolve_pyxis_option("cont").kind == PyxisOptionMatch::Ambiguous);
  CHECK(resolve_pyxis_option("no-container-r").name == "no-container-remap-root");
  CHECK(resolve_pyxis_option("no-c").kind == PyxisOptionMatch::Ambiguous);
  // srun's other options (and another plugin's) are srun's business.
  CHECK(resolve_pyxis_option("contiguous").kind == PyxisOptionMatch::Unknown);
  CHECK(resolve_pyxis_option("container-imagex").kind == PyxisOptionMatch::Unknown);
  CHECK(resolve_pyxis_option("").kind == PyxisOptionMatch::Unknown);
}

TEST_CASE("pyxis options that the spec renders, and enroot's mount flags", "[pyxis-options]") {
  CHECK(hpc::pyxis_option_key("container-image") == "container.image");
  CHECK(hpc::pyxis_option_key("container") == "container.image");
  CHECK(hpc::pyxis_option_key("container-mounts") == "container.mounts");
  CHECK(hpc::pyxis_option_key("container-workdir") == "container.workdir");
  CHECK(hpc::pyxis_option_key("container-name").empty());
  CHECK(hpc::pyxis_option_key("container-writable").empty());
  for (const char* f : {"ro", "rw", "rprivate", "nosuid", "x-create=dir", "rbind", "nofail"})
    CHECK(hpc::is_enroot_mount_flag(f));
  for (const char* f : {"", "bogus", "remount", "x-detach", "x-move", "RO", "size=1G", "ro,rw"})
    CHECK_FALSE(hpc::is_enroot_mount_flag(f));
}
