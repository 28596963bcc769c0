// Bad input in the "container" key (spec/container.h) and --container: one line naming the key
// and the fix, exit status 2, nothing written. bad_input.h says what every case must show.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "bad_input.h"

using namespace cli_test;

namespace {

// render ... --set container.runtime=RUNTIME --set container.image=IMAGE, then `extra`.
std::vector<std::string> container_args(const std::string& runtime, const std::string& image,
                                        std::vector<std::string> extra = {}) {
  std::vector<std::string> sets = {"--set", "container.runtime=" + runtime, "--set",
                                   "container.image=" + image};
  sets.insert(sets.end(), extra.begin(), extra.end());
  return render_args(sets);
}

}  // namespace

TEST_CASE("bad input: the container key", "[bad-input][container]") {
  check_all({
      {"an unknown runtime",
       container_args("docker", "x.sif"),
       {},
       {"--set container.runtime=docker: container.runtime:", "unknown container runtime",
        "apptainer"}},
      {"a misspelt runtime gets a suggestion",
       container_args("aptainer", "x.sif"),
       {},
       {"container.runtime:", "unknown container runtime \"aptainer\"",
        "did you mean "
        "\"apptainer\""}},
      {"an empty image",
       container_args("apptainer", ""),
       {},
       {"container.image:", "is empty", "--container IMAGE"}},
      {"an image that looks like an option",
       container_args("charliecloud", "--help"),
       {},
       {"container.image:", "starts with '-'", "container.options"}},
      {"an image with a newline",
       container_args("apptainer", "a.sif\nb"),
       {},
       {"container.image:", "newline or control character", "remove it"}},
      {"--container without a runtime",
       render_args({"--container", "img.sif"}),
       {},
       {"--container:", "container.runtime is not", "--set container.runtime=apptainer"}},
      {"a container key in the project file without a runtime",
       render_args({}),
       {{kProject, "{\"container\": {\"mounts\": [\"/a:/b\"]}}"}},
       {"hpclaunch.json: container.mounts:", "container.runtime is not"}},
      {"a mount without ':'",
       container_args("apptainer", "x.sif", {"--set", "container.mounts=[\"/scratch\"]"}),
       {},
       {"container.mounts:", "mount \"/scratch\" has no ':'", "write SRC:DST"}},
      {"a relative mount source",
       container_args("pyxis", "nvcr.io#nvidia/pytorch:24.01-py3",
                      {"--set", "container.mounts=[\"data:/data\"]"}),
       {},
       {"container.mounts:", "the source \"data\" is not an absolute path", "both paths"}},
      {"a mount target with ','",
       container_args("pyxis", "img.sqsh", {"--set", "container.mounts=[\"/a:/b,c\"]"}),
       {},
       {"container.mounts:", "the target holds a ','", "use a parent directory"}},
      {"a mount with a path holding ':'",
       container_args("apptainer", "x.sif", {"--set", "container.mounts=[\"/a:/b:ro:x\"]"}),
       {},
       {"container.mounts:", "more than SRC:DST:FLAGS", "use a parent directory"}},
      {"an Apptainer mount flag it does not know",
       container_args("apptainer", "x.sif", {"--set", "container.mounts=[\"/a:/b:rprivate\"]"}),
       {},
       {"container.mounts:", "unknown flag \"rprivate\"", "use ro or rw"}},
      {"a Charliecloud mount with flags",
       container_args("charliecloud", "/img", {"--set", "container.mounts=[\"/a:/b:ro\"]"}),
       {},
       {"container.mounts:", "ch-run's --bind takes no flags", "write SRC:DST"}},
      {"options whose first word is not an option",
       container_args("apptainer", "x.sif", {"--set", "container.options=[\"other.sif\"]"}),
       {},
       {"container.options:", "does not start with '-'", "--writable-tmpfs"}},
      {"pyxis options repeating what the spec renders",
       container_args("pyxis", "img.sqsh",
                      {"--set", "container.options=[\"--container-image=other\"]"}),
       {},
       {"container.options:", "--container-image is rendered from container.image",
        "set container.image instead"}},
      {"a relative workdir",
       container_args("apptainer", "x.sif", {"--set", "container.workdir=work"}),
       {},
       {"container.workdir:", "\"work\" is not an absolute path", "/workspace"}},
      {"gpus neither auto nor a boolean",
       container_args("apptainer", "x.sif", {"--set", "container.gpus=yes"}),
       {},
       {"container.gpus:", "expected \"auto\", true or false", "--nv"}},
      {"gpus on a runtime without a GPU flag",
       container_args("charliecloud", "/img", {"--set", "container.gpus=false"}),
       {},
       {"container.gpus:", "charliecloud takes no GPU flag", "ch-fromhost --nvidia"}},
      {"mounts of the wrong type",
       container_args("apptainer", "x.sif", {"--set", "container.mounts=\"/a:/b\""}),
       {},
       {"container.mounts", "expected a list of strings"}},
  });
}

TEST_CASE("bad input: a container the local backend cannot run", "[bad-input][container]") {
  check_all({
      {"a local image path that does not exist",
       {"run", "--local", "--no-project", "--preset", "1n1g", "--set",
        "container.runtime=charliecloud", "--container", "./no-such-image"},
       {},
       {"container.image:", "the image \"./no-such-image\" does not exist on this machine",
        "build or copy the image there"}},
      {"an Apptainer image file that does not exist",
       {"run", "--local", "--no-project", "--preset", "1n1g", "--set",
        "container.runtime=apptainer", "--container", "/nonexistent/pytorch.sif"},
       {},
       {"container.image:", "\"/nonexistent/pytorch.sif\" does not exist"}},
      {"pyxis, which only Slurm's srun has",
       {"run", "--local", "--no-project", "--preset", "1n1g", "--set", "container.runtime=pyxis",
        "--container", "nvcr.io#nvidia/pytorch:24.01-py3"},
       {},
       {"container.runtime:", "pyxis is a plugin of Slurm's srun", "apptainer or charliecloud"}},
  });
}
