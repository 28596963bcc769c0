// The launch key: modes, the program after `--`, hpctrain's keys under srun and torchrun, the
// torchrun command, the job name from the program.
#include "spec/launch.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>

#include "error.h"
#include "spec/spec.h"

namespace fs = std::filesystem;
using hpc::SpecRequest;
using hpc::UserError;

namespace {

struct LaunchFixture {
  fs::path root;

  LaunchFixture() {
    char tmpl[] = "/tmp/hpclaunch-launch-test-XXXXXX";
    root = mkdtemp(tmpl);
    fs::create_directories(root / "user");
  }
  ~LaunchFixture() { fs::remove_all(root); }

  void write(const fs::path& rel, const std::string& text) const {
    fs::create_directories((root / rel).parent_path());
    std::ofstream(root / rel) << text;
  }

  hpc::Spec resolve(SpecRequest r) const {
    fs::path data = HPC_SOURCE_DIR;
    fs::path user = root / "user";
    hpc::Catalog catalog({{data / "presets", data / "templates", "built-in"},
                          {user, user / "templates", user.string()}});
    if (!r.project_file) r.read_project_file = false;
    return hpc::resolve_spec(catalog, r);
  }
};

SpecRequest program(const std::string& launch, std::vector<std::string> words) {
  SpecRequest r;
  r.preset = "2n2g";
  r.launch = launch;
  r.trainer_args = std::move(words);
  return r;
}

std::string error_of(const LaunchFixture& f, const SpecRequest& r) {
  try {
    f.resolve(r);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("launch: without the key the mode is hpctrain, as before", "[launch]") {
  LaunchFixture f;
  SpecRequest r;
  r.preset = "1n2g";
  r.trainer_args = std::vector<std::string>{"--model", "tiny"};
  auto spec = f.resolve(r);
  CHECK(spec.launch == "hpctrain");
  CHECK(spec.strategy == "ddp");  // the default strategy applies to hpctrain
  CHECK(spec.trainer.program == "hpctrain");
  CHECK(spec.trainer.args == std::vector<std::string>{"--model", "tiny"});
  CHECK_FALSE(spec.resolved.contains("launch"));
  CHECK(spec.job.name == "hpctrain");
}

TEST_CASE("launch: srun takes the whole command after --", "[launch]") {
  LaunchFixture f;
  auto spec = f.resolve(program("srun", {"python", "train.py", "--lr", "3e-4"}));
  CHECK(spec.launch == "srun");
  CHECK(spec.trainer.program == "python");
  CHECK(spec.trainer.args == std::vector<std::string>{"train.py", "--lr", "3e-4"});
  // hpctrain's default strategy does not leak into the user's program or the spec.
  CHECK(spec.strategy.empty());
  CHECK_FALSE(spec.resolved.contains("strategy"));
  CHECK(spec.resolved["launch"] == "srun");
  CHECK(spec.job.name == "train");
  CHECK(spec.resolved["job"]["name"] == "train");
}

TEST_CASE("launch: torchrun has a default command and takes a configured one", "[launch]") {
  LaunchFixture f;
  auto spec = f.resolve(program("torchrun", {"train.py"}));
  CHECK(spec.torchrun_command == std::vector<std::string>{"torchrun"});
  CHECK(spec.resolved["torchrun"]["command"] == nlohmann::json::array({"torchrun"}));
  auto r = program("torchrun", {"python", "-m", "pkg.train"});
  r.sets = {R"(torchrun.command=["python", "-m", "torch.distributed.run"])"};
  spec = f.resolve(r);
  CHECK(spec.torchrun_command == std::vector<std::string>{"python", "-m", "torch.distributed.run"});
  CHECK(spec.job.name == "pkg.train");
}

TEST_CASE("launch: a program set in the project file takes the words after -- as arguments",
          "[launch]") {
  LaunchFixture f;
  f.write("hpclaunch.json",
          R"({"launch": "srun", "trainer": {"program": "python3", "args": ["fit.py"]}})");
  auto r = program("", {"--lr", "1e-3"});
  r.launch.reset();
  r.project_file = f.root / "hpclaunch.json";
  auto spec = f.resolve(r);
  CHECK(spec.launch == "srun");
  CHECK(spec.trainer.program == "python3");
  CHECK(spec.trainer.args == std::vector<std::string>{"fit.py", "--lr", "1e-3"});
  CHECK(spec.job.name == "fit");
}

TEST_CASE("launch: hpctrain's keys from a user's defaults.json stay hpctrain's", "[launch]") {
  LaunchFixture f;
  f.write("user/defaults.json",
          R"({"strategy": "fsdp", "trainer": {"program": "/opt/hpctrain", "args": ["--x"]}})");
  auto spec = f.resolve(program("srun", {"./run.sh", "a b"}));
  CHECK(spec.strategy.empty());
  CHECK(spec.trainer.program == "./run.sh");
  CHECK(spec.trainer.args == std::vector<std::string>{"a b"});
  CHECK(spec.job.name == "run.sh");
}

TEST_CASE("launch: a job name set by the user wins over the program's", "[launch]") {
  LaunchFixture f;
  auto r = program("srun", {"python", "train.py"});
  r.sets = {"job.name=my run"};
  CHECK(f.resolve(r).job.name == "my run");
}

TEST_CASE("launch: the job name from the program is a safe file name", "[launch]") {
  using hpc::job_name_from_program;
  CHECK(job_name_from_program("hpctrain", {"--model", "tiny"}) == "hpctrain");
  CHECK(job_name_from_program("/usr/bin/python3.11", {"src/train.py"}) == "train");
  CHECK(job_name_from_program("python", {"-u", "train.py"}) == "python");
  CHECK(job_name_from_program("python", {"-m", "pkg.train"}) == "pkg.train");
  CHECK(job_name_from_program("bash", {"job.sh"}) == "job");
  CHECK(job_name_from_program("./my tool", {}) == "my_tool");
  CHECK(job_name_from_program("python", {"$(touch x).py"}) == "__touch_x_");
  CHECK(job_name_from_program("python", {".hidden"}) == "hpclaunch");
  CHECK(job_name_from_program(std::string(100, 'a'), {}).size() == 64);
}

TEST_CASE("launch: bad launch input is one line naming the key and the fix", "[launch]") {
  LaunchFixture f;
  CHECK(error_of(f, program("srn", {"x"})) ==
        "--launch: unknown launch mode \"srn\"; did you mean \"srun\"?");
  auto r = program("srun", {"python", "t.py"});
  r.strategy = "fsdp";
  CHECK(error_of(f, r).rfind("--strategy: a strategy is hpctrain's, and launch is srun; ", 0) == 0);
  CHECK(error_of(f, program("torchrun", {}))
            .rfind("--launch: launch torchrun has no program to run; put the command after --",
                   0) == 0);
  CHECK(error_of(f, program("srun", {""})).find("has no program to run") != std::string::npos);
  r = program("torchrun", {"train.py"});
  r.sets = {"torchrun.command=[]"};
  CHECK(error_of(f, r).rfind("--set torchrun.command=[]: torchrun.command: is empty; ", 0) == 0);
  r.sets = {R"(torchrun.command=["torchrun", ""])"};
  CHECK(error_of(f, r).find("entry 2 is empty") != std::string::npos);
  r = program("srun", {"python", "t.py"});
  r.sets = {"trainer.command=bench-allreduce"};
  CHECK(error_of(f, r).find("trainer.command: is hpctrain's verb") != std::string::npos);
  f.write("hpclaunch.json", R"({"launch": "torchrun", "strategy": "zero1"})");
  r = program("", {"train.py"});
  r.launch.reset();
  r.project_file = f.root / "hpclaunch.json";
  CHECK(error_of(f, r).rfind(f.root.string() + "/hpclaunch.json: strategy: a strategy is", 0) == 0);
  r.sets = {"launch=mpirun"};
  CHECK(error_of(f, r).find("unknown launch mode \"mpirun\"") != std::string::npos);
}
