#include "spec/spec.h"
#include "spec/slurm_time.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>

#include "error.h"
#include "spec/schema.h"

namespace fs = std::filesystem;
using hpc::Catalog;
using hpc::SpecRequest;
using hpc::UserError;

namespace {

// A throwaway directory with a built-in layer (the real presets/) and one user layer.
struct SpecFixture {
  fs::path root;
  fs::path user;

  SpecFixture() {
    char tmpl[] = "/tmp/hpclaunch-spec-test-XXXXXX";
    root = mkdtemp(tmpl);
    user = root / "user";
    fs::create_directories(user / "shapes");
    fs::create_directories(user / "clusters");
  }
  ~SpecFixture() { fs::remove_all(root); }

  void write(const fs::path& rel, const std::string& text) const {
    fs::create_directories((root / rel).parent_path());
    std::ofstream(root / rel) << text;
  }

  Catalog catalog() const {
    fs::path data = HPC_SOURCE_DIR;
    return Catalog({{data / "presets", data / "templates", "built-in"},
                    {user, user / "templates", user.string()}});
  }

  hpc::Spec resolve(SpecRequest r) const {
    r.read_project_file = false;
    return hpc::resolve_spec(catalog(), r);
  }
};

SpecRequest ask(const std::string& preset, const std::string& cluster = "generic",
                const std::string& strategy = "ddp") {
  SpecRequest r;
  r.preset = preset;
  r.cluster = cluster;
  r.strategy = strategy;
  return r;
}

}  // namespace

TEST_CASE("spec: a preset on a cluster resolves to typed values", "[spec]") {
  SpecFixture f;
  SpecRequest daic = ask("2n4g", "daic", "fsdp");
  daic.sets = {"profile.account=grp", "shape.mem_per_gpu=16G"};
  auto spec = f.resolve(daic);
  CHECK(spec.shape.nodes == 2);
  CHECK(spec.shape.gpus_per_node == 4);
  CHECK(spec.world_size() == 8);
  CHECK(spec.profile.gpu_request == hpc::GpuRequest::Gres);
  REQUIRE(spec.profile.nccl.size() == 1);
  CHECK(spec.profile.nccl[0].name == "NCCL_P2P_DISABLE");
  CHECK(spec.profile.nccl[0].value == "1");  // an integer in the file, a string in the script
  CHECK_FALSE(spec.profile.nccl[0].reason.empty());
  CHECK(spec.job.signal_seconds == 90);
  CHECK(spec.trainer.program == "hpctrain");
  CHECK(spec.sources.at("shape.nodes").find("shapes/2n4g.json") != std::string::npos);
  CHECK(spec.sources.at("profile.gpu_request").find("clusters/daic.json") != std::string::npos);
}

TEST_CASE("spec: every built-in preset renders on every cluster that can hold it", "[spec]") {
  SpecFixture f;
  auto catalog = f.catalog();
  int ok = 0, rejected = 0;
  for (const auto& preset : catalog.names(hpc::PresetKind::Shape)) {
    for (const auto& cluster : catalog.names(hpc::PresetKind::Cluster)) {
      SpecRequest r = ask(preset, cluster);
      // What the profiles require.
      r.sets = {"profile.account=proj", "profile.qos=normal"};
      try {
        f.resolve(r);
        ++ok;
      } catch (const UserError& e) {
        // Only 8-GPU nodes on 4-GPU clusters may fail.
        const std::string why = e.what();
        CHECK(why.find("GPUs per node") != std::string::npos);
        ++rejected;
      }
    }
  }
  CHECK(ok >= 24);
  CHECK(rejected == 2);  // 2n8g on baskerville and jsc (DAIC's guide names no GPU count)
}

TEST_CASE("spec: later layers win, null removes, -- args append", "[spec]") {
  SpecFixture f;
  f.write("user/defaults.json", R"({"job": {"name": "from-user", "max_requeues": 7}})");
  f.write("project.json", R"({
    // a project file
    "job": {"name": "from-project"},
    "shape": {"time": "10:00"},
    "profile": {"nccl": {"NCCL_P2P_DISABLE": null}},
    "trainer": {"args": ["--data", "/d"]}
  })");
  SpecRequest r = ask("1n2g", "daic");
  r.project_file = f.root / "project.json";
  r.trainer_args = std::vector<std::string>{"--max-steps", "5"};
  r.sets = {"shape.time=20", "profile.account=grp", "shape.mem_per_gpu=16G"};
  auto spec = hpc::resolve_spec(f.catalog(), r);
  CHECK(spec.job.name == "from-project");
  CHECK(spec.job.max_requeues == 7);
  CHECK(spec.shape.time == "20");
  CHECK(spec.sources.at("shape.time") == "--set shape.time=20");
  CHECK(spec.profile.nccl.empty());
  CHECK(spec.trainer.args == std::vector<std::string>{"--data", "/d", "--max-steps", "5"});
}

TEST_CASE("spec: a user profile extending the built-in of the same name", "[spec]") {
  SpecFixture f;
  f.write("user/clusters/jsc.json",
          R"({"extends": "jsc", "account": "mine", "partition": "dc-gpu"})");
  auto spec = f.resolve(ask("2n4g", "jsc"));
  CHECK(spec.profile.account == "mine");
  CHECK(spec.profile.partition == "dc-gpu");
  CHECK(spec.profile.ib_suffix == "i");  // from the built-in below it
}

TEST_CASE("spec: errors name the file, the key path and a fix", "[spec]") {
  SpecFixture f;
  auto message = [&](SpecRequest r) {
    try {
      f.resolve(r);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  SpecRequest r = ask("2n8g", "jsc");
  r.sets = {"profile.account=x"};
  CHECK_THAT(message(r), Catch::Contains("shapes/2n8g.json: shape.gpus_per_node") &&
                             Catch::Contains("at most 4"));
  CHECK_THAT(message(ask("2n4", "generic")), Catch::Contains("did you mean \"2n4g\""));
  CHECK_THAT(message(ask("2n4g", "generic", "fdsp")), Catch::Contains("did you mean \"fsdp\""));
  CHECK_THAT(message(ask("2n4g", "jsc")),
             Catch::StartsWith("profile.account: cluster \"jsc\" requires"));
  r = ask("1n1g");
  r.sets = {"shape.gpu_per_node=2"};
  CHECK_THAT(message(r), Catch::Contains("--set shape.gpu_per_node") &&
                             Catch::Contains("did you mean \"gpus_per_node\""));
  r.sets = {"shape.nodes=0"};
  CHECK_THAT(message(r), Catch::Contains("--set shape.nodes=0: shape.nodes") &&
                             Catch::Contains("out of range"));
  r.sets = {"job.signal_seconds=3600"};
  CHECK_THAT(message(r), Catch::Contains("not less than the time limit"));
  r.sets = {"job.name=a\nb"};
  CHECK_THAT(message(r), Catch::Contains("job.name") && Catch::Contains("single lines"));
  f.write("user/shapes/bad.json", "{\n  \"nodes\": 2,\n  \"gpus_per_node\": \"4\"\n}\n");
  CHECK_THAT(message(ask("bad")), Catch::Contains("shapes/bad.json: gpus_per_node") &&
                                      Catch::Contains("without quotes"));
  f.write("user/shapes/broken.json", "{\n  \"nodes\": 2,\n  \"gpus_per_node\" 4\n}\n");
  CHECK_THAT(message(ask("broken")), Catch::Contains("shapes/broken.json:3:19"));
}

TEST_CASE("spec: Slurm time limits", "[spec]") {
  CHECK(hpc::parse_slurm_time("30", "t") == 1800);
  CHECK(hpc::parse_slurm_time("30:15", "t") == 1815);
  CHECK(hpc::parse_slurm_time("02:00:00", "t") == 7200);
  CHECK(hpc::parse_slurm_time("1-00", "t") == 86400);
  CHECK(hpc::parse_slurm_time("1-02:03", "t") == 86400 + 7200 + 180);
  CHECK(hpc::parse_slurm_time("1-02:03:04", "t") == 86400 + 7200 + 180 + 4);
  CHECK(hpc::parse_slurm_time("UNLIMITED", "t") == -1);
  CHECK_THROWS_AS(hpc::parse_slurm_time("2h", "t"), UserError);
  CHECK_THROWS_AS(hpc::parse_slurm_time("0", "t"), UserError);
  CHECK_THROWS_AS(hpc::parse_slurm_time("1:2:3:4", "t"), UserError);
}

TEST_CASE("spec: --set values are typed by the schema", "[spec]") {
  CHECK(hpc::parse_set_assignment("shape.nodes=4") ==
        nlohmann::json::parse(R"({"shape":{"nodes":4}})"));
  CHECK(hpc::parse_set_assignment("job.name=42") ==
        nlohmann::json::parse(R"({"job":{"name":"42"}})"));
  CHECK(hpc::parse_set_assignment("profile.resolve_master_addr=false") ==
        nlohmann::json::parse(R"({"profile":{"resolve_master_addr":false}})"));
  CHECK(hpc::parse_set_assignment(R"(trainer.args=["--a","b c"])") ==
        nlohmann::json::parse(R"({"trainer":{"args":["--a","b c"]}})"));
  CHECK(hpc::parse_set_assignment("profile.nccl.NCCL_DEBUG.value=INFO") ==
        nlohmann::json::parse(R"({"profile":{"nccl":{"NCCL_DEBUG":{"value":"INFO"}}}})"));
  CHECK_THROWS_AS(hpc::parse_set_assignment("shape.nodes=four"), UserError);
  CHECK_THROWS_AS(hpc::parse_set_assignment("shape..nodes=4"), UserError);
  CHECK_THROWS_AS(hpc::parse_set_assignment("shape.nodes"), UserError);
  CHECK_THROWS_AS(hpc::parse_set_assignment("trainer.args=--x"), UserError);
}

TEST_CASE("spec: an extends cycle is reported with its files", "[spec]") {
  SpecFixture f;
  f.write("user/clusters/a.json", R"({"extends": "b"})");
  f.write("user/clusters/b.json", R"({"extends": "a"})");
  CHECK_THROWS_WITH(f.resolve(ask("1n1g", "a")), Catch::Contains("cycle: ") &&
                                                     Catch::Contains("a.json -> ") &&
                                                     Catch::Contains("b.json -> "));
}

TEST_CASE("spec: built-in files are named relative to the data directory", "[spec]") {
  SpecFixture f;
  SpecRequest r = ask("1n1g", "daic");
  r.sets = {"profile.account=grp", "shape.mem_per_gpu=16G"};
  auto spec = f.resolve(r);
  CHECK(spec.sources.at("shape.nodes") == "presets/shapes/1n1g.json");
  CHECK(spec.sources.at("profile.gpu_request") == "presets/clusters/daic.json");
  CHECK(spec.sources.at("job.srun_wait") == "presets/defaults.json");
}

TEST_CASE("spec: a shape named NnMg without a file is N nodes x M GPUs", "[spec][shape]") {
  SpecFixture f;
  // ATI's Baskerville course runs 2 nodes x 3 GPUs: no file, the name says it.
  auto s = f.resolve(ask("2n3g"));
  CHECK(s.shape.nodes == 2);
  CHECK(s.shape.gpus_per_node == 3);
  CHECK(s.world_size() == 6);
  // The other keys from the nearest preset: 2n2g and 2n4g are one GPU apart, the larger wins.
  CHECK(s.shape.by_name_base == "2n4g");
  CHECK(s.shape.time == "04:00:00");
  CHECK(s.sources.at("shape.nodes") == "--preset 2n3g (a shape by its name)");
  CHECK(s.sources.at("shape.time").find("shapes/2n4g.json") != std::string::npos);
  // Fewest nodes apart first: 3n4g takes 4n4g's (2n4g and 4n4g are one node apart: the larger).
  CHECK(f.resolve(ask("3n4g")).shape.by_name_base == "4n4g");
  CHECK(f.resolve(ask("16n4g")).shape.by_name_base == "4n4g");
  CHECK(f.resolve(ask("1n3g")).shape.by_name_base == "1n4g");
  // A file of that name wins; a file is no by-name shape.
  CHECK(f.resolve(ask("2n4g")).shape.by_name_base.empty());
  f.write("user/shapes/2n3g.json", "{\"nodes\": 2, \"gpus_per_node\": 3, \"cpus_per_gpu\": 36, "
                                   "\"time\": \"01:00:00\"}");
  s = f.resolve(ask("2n3g"));
  CHECK(s.shape.by_name_base.empty());
  CHECK(s.shape.cpus_per_gpu == 36);
  // The site's limits still hold, and names that are no shape stay unknown.
  SpecRequest r = ask("1n8g", "jsc");
  r.sets = {"profile.account=x"};
  CHECK_THROWS_WITH(f.resolve(r), Catch::Contains("shape.gpus_per_node") &&
                                      Catch::Contains("at most 4"));
  for (const char* bad : {"0n2g", "2n0g", "02n2g", "2n65g", "n2g", "2ng", "2n2", "2x2g"})
    CHECK_THROWS_WITH(f.resolve(ask(bad)), Catch::Contains("no preset named"));
}

TEST_CASE("shape_by_name reads NnMg and nothing else", "[spec][shape]") {
  CHECK(hpc::shape_by_name("2n3g") == std::make_pair(2, 3));
  CHECK(hpc::shape_by_name("100000n64g") == std::make_pair(100000, 64));
  CHECK_FALSE(hpc::shape_by_name("100001n1g"));
  CHECK_FALSE(hpc::shape_by_name("1n65g"));
  CHECK_FALSE(hpc::shape_by_name("2n4g-long"));
  CHECK_FALSE(hpc::shape_by_name("1n-1g"));
}
