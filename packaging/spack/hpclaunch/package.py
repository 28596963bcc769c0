# Spack recipe for hpclaunch (docs/install.md). Use it from a repository of your own:
#   spack repo add PATH/TO/hpclaunch/packaging/spack        (the folder holding repo.yaml)
#   spack install hpclaunch@main                             (or +trainer, +trainer+cuda)
#   spack load hpclaunch   /   module load hpclaunch         (Spack's own module generation)
# A site without access to the repository: `spack install hpclaunch@main` after
# `spack develop --path ~/src/hpclaunch hpclaunch@main` builds a local checkout instead.

from spack.package import *


class Hpclaunch(CMakePackage):
    """Declarative presets and cluster profiles -> reviewable sbatch scripts -> submit, follow,
    sweep and tune distributed training on Slurm clusters. The +trainer variant adds hpctrain,
    GPT-2 training in C++ with LibTorch (DDP, FSDP, ZeRO)."""

    # The project has no public address yet: a site sets its own (or uses `spack develop`).
    homepage = "https://github.com/hpclaunch/hpclaunch"
    git = "https://github.com/hpclaunch/hpclaunch.git"

    maintainers("hpclaunch")
    license("Apache-2.0")

    version("main", branch="main")

    variant("trainer", default=False, description="Build hpctrain (needs LibTorch)")
    variant("cuda", default=False, when="+trainer",
            description="hpctrain on CUDA GPUs with NCCL (a CUDA build of LibTorch)")

    depends_on("cxx", type="build")
    depends_on("cmake@3.25:", type="build")
    depends_on("cli11@2.1:")
    depends_on("nlohmann-json@3.10:")
    depends_on("fmt@9:")
    depends_on("libssh")
    depends_on("re2")
    depends_on("pkgconfig", type="build")  # RE2 is found through its pkg-config file
    depends_on("openssl")
    depends_on("catch2@2", type="test")
    # kainjow's header-only Mustache (Debian: libkainjow-mustache-dev) has no Spack package:
    # its release tarball comes along as a resource, its header put where the sources include it.
    resource(
        name="kainjow-mustache",
        url="https://github.com/kainjow/Mustache/archive/v4.1.tar.gz",
        sha256="acd66359feb4318b421f9574cfc5a511133a77d916d0b13c7caa3783c0bfe167",
        destination="third_party",
        placement="mustache",
    )

    # hpctrain: LibTorch from Spack's py-torch (its C++ library and TorchConfig.cmake), with
    # Gloo for CPU runs; +cuda asks for a CUDA build with NCCL.
    depends_on("py-torch", when="+trainer")
    depends_on("py-torch+cuda+nccl", when="+trainer+cuda")
    depends_on("py-torch~cuda", when="+trainer~cuda")
    depends_on("cuda", when="+trainer+cuda")

    @run_before("cmake")
    def mustache_header(self):
        include = join_path(self.stage.source_path, "third_party", "include", "kainjow")
        mkdirp(include)
        copy(join_path(self.stage.source_path, "third_party", "mustache", "mustache.hpp"), include)

    def cmake_args(self):
        include = join_path(self.stage.source_path, "third_party", "include")
        args = [
            self.define("CMAKE_CXX_FLAGS", "-isystem " + include),
            self.define_from_variant("HPC_BUILD_TRAINER", "trainer"),
            self.define("HPC_BUILD_TESTS", self.run_tests),
            # @main is a git clone: --version names its commit (cmake/git_revision.cmake).
            # The Lmod modulefile goes under the prefix; Spack writes its own modules too.
            self.define("HPC_MODULEFILE_DIR", "modulefiles"),
        ]
        # TorchConfig.cmake: Spack puts py-torch's cmake_prefix_paths on CMAKE_PREFIX_PATH.
        return args

    @run_after("install")
    @on_package_attributes(run_tests=True)
    def check_installed(self):
        hpclaunch = Executable(self.prefix.bin.hpclaunch)
        hpclaunch("--version")
        hpclaunch("presets", "list")

    def test_version(self):
        """hpclaunch --version names the release"""
        out = Executable(self.prefix.bin.hpclaunch)("--version", output=str.split)
        assert "hpclaunch" in out

    def setup_run_environment(self, env):
        env.set("HPCLAUNCH_DATA_DIR", join_path(self.prefix.share, "hpclaunch"))
        env.prepend_path("XDG_DATA_DIRS", self.prefix.share)
