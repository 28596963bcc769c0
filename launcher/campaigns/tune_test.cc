// hpclaunch tune's pieces: grid files (good and bad), the default grid, the score at large
// sizes, ranking, the tuned profile and its reasons, and a whole tune through a
// scripted backend (two candidates measured, one hung).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "campaigns/tune.h"
#include "error.h"
#include "json_file.h"
#include "spec/schema.h"
#include "support/scripted_backend.h"

namespace fs = std::filesystem;
using namespace hpc;
using nlohmann::json;

namespace {

TuneGrid grid_of(const std::string& text) {
  return parse_tune_grid(parse_json_text(text, "grid.json"), "grid.json");
}

std::string grid_error(const std::string& text, int max_candidates = 32) {
  try {
    expand_tune_grid(grid_of(text), max_candidates);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::vector<BusbwRow> rows_of(const std::vector<std::pair<long long, double>>& v) {
  std::vector<BusbwRow> rows;
  for (const auto& [size, bw] : v) {
    BusbwRow r;
    r.size = size;
    r.busbw_gbps = bw;
    rows.push_back(r);
  }
  return rows;
}

TuneOutcome outcome(const std::string& id, std::vector<std::pair<std::string, TuneValue>> vars,
                    std::optional<double> score, const std::string& state = "COMPLETED") {
  TuneOutcome o;
  o.candidate.id = id;
  o.candidate.vars = std::move(vars);
  o.state = state;
  o.score = score;
  if (score) {
    BenchResult b;
    b.rows = rows_of({{64LL << 20, *score}});
    b.hostnames = {"node01", "node01", "node02", "node02"};
    o.bench = b;
    o.nodes = "node[01-02]";
  }
  return o;
}

}  // namespace

TEST_CASE("a grid's variables give every combination, then its explicit candidates", "[tune]") {
  auto c = expand_tune_grid(grid_of(R"({
      // comments are allowed
      "variables": {"NCCL_ALGO": ["Ring", "Tree"], "NCCL_P2P_DISABLE": [0, 1]},
      "candidates": [{"NCCL_ALGO": "CollnetDirect", "NCCL_IB_HCA": null}]
    })"),
                            32);
  REQUIRE(c.size() == 5);
  CHECK(c[0].id == "c1");
  CHECK(c[0].describe() == "NCCL_ALGO=Ring NCCL_P2P_DISABLE=0");
  CHECK(c[1].describe() == "NCCL_ALGO=Ring NCCL_P2P_DISABLE=1");
  CHECK(c[3].describe() == "NCCL_ALGO=Tree NCCL_P2P_DISABLE=1");
  CHECK(c[4].id == "c5");
  CHECK(c[4].describe() == "NCCL_ALGO=CollnetDirect NCCL_IB_HCA=(unset)");
  CHECK_FALSE(c[4].vars[1].second.has_value());
  // Two candidates, as in the integration test.
  CHECK(expand_tune_grid(grid_of(R"({"variables": {"NCCL_ALGO": ["Ring", "Tree"]}})"), 32).size() ==
        2);
}

TEST_CASE("bad grids: one line naming the file and key, and what to do", "[tune]") {
  CHECK(has(grid_error("{}"), "grid.json: the grid has no candidates"));
  CHECK(has(grid_error(R"({"variables": {}})"), "the grid has no candidates"));
  CHECK(has(grid_error(R"({"candidates": []})"), "the grid has no candidates"));
  CHECK(has(grid_error(R"({"variables": {"NCCL_ALGO": []}})"),
            "grid.json: variables.NCCL_ALGO: an empty list of values"));
  CHECK(has(grid_error(R"({"variables": {"NCCL_ALGO": {"Ring": 1}}})"),
            "variables.NCCL_ALGO: expected a list of values, got an object"));
  CHECK(has(grid_error(R"({"variables": {"NCCL_ALGO": "Ring"}})"), "expected a list of values"));
  CHECK(has(grid_error(R"({"variables": {"NCCL_ALGO": ["Ring", true]}})"),
            "variables.NCCL_ALGO[1]: expected a string, an integer or null"));
  CHECK(
      has(grid_error(R"({"variables": {"NCCL_ALGO": ["Ring", "Ring"]}})"), "Ring is listed twice"));
  CHECK(
      has(grid_error(R"({"variables": {"1NCCL": ["a"]}})"), "is not an environment variable name"));
  CHECK(has(grid_error(R"({"variables": {"MASTER_PORT": ["1"]}})"),
            "MASTER_PORT is computed by the batch script"));
  CHECK(has(grid_error(R"({"varaibles": {}})"),
            "grid.json: varaibles: unknown key; did you mean \"variables\"?"));
  CHECK(has(grid_error(R"({"candidates": {"NCCL_ALGO": "Ring"}})"),
            "candidates: expected a list of objects"));
  CHECK(has(grid_error(R"({"candidates": [{}]})"), "candidates[0]: an empty candidate"));
  CHECK(has(grid_error(R"({"candidates": ["NCCL_ALGO=Ring"]})"),
            "candidates[0]: expected an object"));
  CHECK(has(grid_error("[1, 2]"), "expected a JSON object"));
  // Bad JSON: line and column.
  std::string e;
  try {
    grid_of("{\n  \"variables\": {\"NCCL_ALGO\": [\"Ring\",]}\n}");
  } catch (const UserError& err) {
    e = err.what();
  }
  CHECK(has(e, "grid.json:2:"));
  // Too many candidates: refused with the flag that allows them.
  std::string big = grid_error(R"({"variables": {"A": [1, 2], "B": [1, 2], "C": [1, 2]}})", 4);
  CHECK(has(big, "8 candidates, more than 4"));
  CHECK(has(big, "--max-candidates 8"));
  for (const auto& msg : {big, grid_error("{}")}) CHECK(msg.find('\n') == std::string::npos);
}

TEST_CASE("the default grid: ALGO x PROTO x P2P, the profile's HCA and interface or unset",
          "[tune]") {
  ClusterProfile plain;
  auto c = expand_tune_grid(default_tune_grid(plain), 32);
  REQUIRE(c.size() == 8);
  CHECK(c[0].describe() == "NCCL_ALGO=Ring NCCL_PROTO=Simple NCCL_P2P_DISABLE=0");
  CHECK(c[7].describe() == "NCCL_ALGO=Tree NCCL_PROTO=LL128 NCCL_P2P_DISABLE=1");
  ClusterProfile ib;
  ib.nccl = {{"NCCL_IB_HCA", "mlx5", "the IB card"}, {"NCCL_SOCKET_IFNAME", "ib0", "IPoIB"}};
  auto d = expand_tune_grid(default_tune_grid(ib), 32);
  REQUIRE(d.size() == 32);
  CHECK(d[0].describe() ==
        "NCCL_ALGO=Ring NCCL_PROTO=Simple NCCL_P2P_DISABLE=0 NCCL_IB_HCA=mlx5 "
        "NCCL_SOCKET_IFNAME=ib0");
  CHECK(d[3].describe() ==
        "NCCL_ALGO=Ring NCCL_PROTO=Simple NCCL_P2P_DISABLE=0 NCCL_IB_HCA=(unset) "
        "NCCL_SOCKET_IFNAME=(unset)");
  CHECK_THROWS_AS(expand_tune_grid(default_tune_grid(ib), 31), UserError);
}

TEST_CASE("the score is the mean busbw over sizes >= 64 MiB, else over the largest quarter",
          "[tune]") {
  auto big = rows_of({{1 << 20, 1.0}, {32LL << 20, 5.0}, {64LL << 20, 10.0}, {128LL << 20, 20.0}});
  CHECK(*tune_score(big) == Approx(15.0));
  CHECK(has(tune_score_metric(big), "sizes >= 64 MiB: 64MiB..128MiB (2 sizes)"));
  // 1K..1M by 2: 11 sizes, the largest quarter is the 3 largest (256K, 512K, 1M).
  std::vector<std::pair<long long, double>> v;
  for (int i = 0; i <= 10; ++i) v.push_back({1024LL << i, static_cast<double>(i)});
  auto small = rows_of(v);
  CHECK(*tune_score(small) == Approx((8.0 + 9.0 + 10.0) / 3));
  CHECK(has(tune_score_metric(small), "largest quarter"));
  CHECK(*tune_score(rows_of({{4096, 3.0}})) == Approx(3.0));
  CHECK_FALSE(tune_score({}));
}

TEST_CASE("ranking: measured candidates by score, then the rest in order", "[tune]") {
  std::vector<TuneOutcome> o = {outcome("c1", {}, 5.0), outcome("c2", {}, std::nullopt, "FAILED"),
                                outcome("c3", {}, 9.0), outcome("c4", {}, std::nullopt, "HUNG"),
                                outcome("c5", {}, 5.0)};
  auto r = rank_tune_outcomes(o);
  CHECK(r == std::vector<size_t>{2, 0, 4, 1, 3});
}

TEST_CASE(
    "the tuned profile extends the cluster, gives each winning variable its reason, records every "
    "row",
    "[tune]") {
  std::vector<TuneOutcome> o = {
      outcome("c1", {{"NCCL_ALGO", "Ring"}, {"NCCL_PROTO", "Simple"}}, 10.0),
      outcome("c2", {{"NCCL_ALGO", "Tree"}, {"NCCL_PROTO", "Simple"}}, 12.5),
      outcome("c3", {{"NCCL_ALGO", "Tree"}, {"NCCL_PROTO", "LL128"}}, std::nullopt, "HUNG"),
      outcome("c4",
              {{"NCCL_ALGO", "Tree"}, {"NCCL_PROTO", "Simple"}, {"NCCL_IB_HCA", std::nullopt}},
              1.0)};
  o[2].message = "still running after 700 s";
  auto ranking = rank_tune_outcomes(o);
  json p = tuned_profile("jsc", "2n4g", "2026-11-22T08:00:00Z", o, ranking, "hpclaunch tune");
  CHECK_NOTHROW(check_json(p, cluster_file_schema(), "tuned"));
  CHECK(p["extends"] == "jsc");
  CHECK(p["nccl"]["NCCL_ALGO"]["value"] == "Tree");
  std::string algo = p["nccl"]["NCCL_ALGO"]["reason"];
  CHECK(has(algo, "tune 2026-11-22: busbw 12.500 GB/s vs 10.000 with NCCL_ALGO=Ring (c1)"));
  CHECK(has(algo, "2n4g on node01,node02"));
  std::string proto = p["nccl"]["NCCL_PROTO"]["reason"];
  // The other PROTO value was only tried by the hung candidate, and c4 shares Simple.
  CHECK(has(proto, "NCCL_PROTO=LL128 (c3) gave no measurement: HUNG"));
  CHECK_FALSE(p["nccl"].contains("NCCL_IB_HCA"));  // not in the winner's set
  const json& t = p["tuning"];
  CHECK(t["winner"] == "c2");
  CHECK(t["nodes"] == json({"node01", "node02"}));
  CHECK(t["date"] == "2026-11-22T08:00:00Z");
  REQUIRE(t["candidates"].size() == 4);
  CHECK(t["candidates"][0]["id"] == "c2");
  CHECK(t["candidates"][0]["busbw"][0]["busbw_gbps"] == 12.5);
  CHECK(t["candidates"][3]["id"] == "c3");
  CHECK(t["candidates"][3]["score_gbps"].is_null());
  CHECK(t["candidates"][3]["message"] == "still running after 700 s");
  CHECK(t["candidates"][2]["vars"]["NCCL_IB_HCA"].is_null());
  auto lines = describe_tuning(t);
  REQUIRE(lines.size() >= 4);
  CHECK(has(lines[0], "nodes node01,node02"));
  CHECK(has(lines[3], "c2"));
  CHECK(has(lines[3], "12.500"));
}

namespace {
// Jobs do what their name says: c1 and c2 complete with a bench table (c2 faster), c3 runs
// forever (a hang), c4 fails.
test::ScriptedJob bench_job(double busbw) {
  json j = {{"world_size", 4},
            {"backend", "gloo"},
            {"hostnames", {"node01", "node01", "node02", "node02"}},
            {"rows",
             {{{"size", 1 << 20},
               {"count", 1 << 18},
               {"time_us", 100.0},
               {"algbw_gbps", busbw},
               {"busbw_gbps", busbw * 1.5},
               {"wrong", 0}}}}};
  return {{{"COMPLETED"}}, {{"allreduce.json", j.dump()}}};
}

test::ScriptedBackend bench_backend() {
  test::ScriptedBackend b("slurm", 500);
  b.on_name("-c1", bench_job(2.0)).on_name("-c2", bench_job(3.0));
  b.on_name("-c3", {{{"RUNNING"}}, {}}).on_name("-c4", {{{"FAILED", 0, "", 1}}, {}});
  return b;
}

struct TempConfigHome {
  fs::path dir;
  std::string old;
  bool had = false;
  TempConfigHome() {
    dir = fs::temp_directory_path() / ("tune_test_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir / "runs");
    if (const char* x = std::getenv("XDG_CONFIG_HOME")) {
      had = true;
      old = x;
    }
    ::setenv("XDG_CONFIG_HOME", (dir / "config").c_str(), 1);
  }
  ~TempConfigHome() {
    if (had)
      ::setenv("XDG_CONFIG_HOME", old.c_str(), 1);
    else
      ::unsetenv("XDG_CONFIG_HOME");
    fs::remove_all(dir);
  }
};
}  // namespace

TEST_CASE(
    "a tune submits one bench job per candidate, reports the hung and failed ones, writes the "
    "winner",
    "[tune]") {
  TempConfigHome home;
  fs::path grid = home.dir / "grid.json";
  std::ofstream(grid) << R"({"candidates": [{"NCCL_ALGO": "Ring"}, {"NCCL_ALGO": "Tree"},
                            {"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL"},
                            {"NCCL_ALGO": "CollnetDirect"}]})";
  TuneConfig c;
  c.cluster = "generic";
  c.preset = "2n2g";
  c.grid_file = grid.string();
  c.no_project = true;
  c.max_concurrent = 4;
  c.timeout_s = 1;
  c.hang_grace_s = 0;
  c.poll_interval_s = 0.05;
  c.min_size = "1K";
  c.max_size = "1M";
  BackendChoice choice;
  choice.runs_dir = (home.dir / "runs").string();
  test::ScriptedBackend backend = bench_backend();
  REQUIRE(run_tune(c, choice, {"hpclaunch", "tune"}, &backend) == 0);
  REQUIRE(backend.submitted.size() == 4);
  CHECK(backend.cancelled.size() == 1);  // the hung one
  const std::string& script = backend.scripts["tune-generic-c2"];
  CHECK(has(script, "hpctrain bench-allreduce"));
  CHECK_FALSE(has(script, "--strategy"));
  CHECK(has(script, "export NCCL_ALGO=Tree"));
  CHECK(has(script, " --max 1M"));
  CHECK(has(script, "#SBATCH --time=00:01:00"));

  fs::path written = home.dir / "config/hpclaunch/clusters/generic-tuned.json";
  REQUIRE(fs::exists(written));
  json p = read_json_file(written);
  CHECK(p["extends"] == "generic");
  CHECK(p["nccl"]["NCCL_ALGO"]["value"] == "Tree");
  CHECK(
      has(p["nccl"]["NCCL_ALGO"]["reason"], "busbw 4.500 GB/s vs 3.000 with NCCL_ALGO=Ring (c1)"));
  const json& cands = p["tuning"]["candidates"];
  REQUIRE(cands.size() == 4);
  std::map<std::string, json> by_id;
  for (const auto& x : cands) by_id[x["id"]] = x;
  CHECK(by_id["c3"]["state"] == "HUNG");
  CHECK(has(by_id["c3"]["message"], "still running after"));
  CHECK(by_id["c4"]["state"] == "FAILED");
  CHECK(by_id["c1"]["busbw"].size() == 1);
  CHECK(p["tuning"]["nodes"] == json({"node01", "node02"}));

  // The tuned profile resolves, and a second tune refuses to overwrite it without --force,
  // before submitting anything.
  Catalog catalog = Catalog::from_environment();
  SpecRequest r;
  r.preset = "2n2g";
  r.cluster = "generic-tuned";
  r.read_project_file = false;
  Spec s = resolve_spec(catalog, r);
  REQUIRE(s.profile.nccl.size() == 1);
  CHECK(s.profile.nccl[0].value == "Tree");
  test::ScriptedBackend again = bench_backend();
  CHECK_THROWS_WITH(run_tune(c, choice, {"hpclaunch", "tune"}, &again),
                    Catch::Contains("pass --force"));
  CHECK(again.submitted.empty());
}

TEST_CASE("a tune refuses bad input before submitting: multi-node on the local backend, bad values",
          "[tune]") {
  TempConfigHome home;
  TuneConfig c;
  c.cluster = "generic";
  c.preset = "2n2g";
  c.no_project = true;
  BackendChoice choice;
  choice.kind = "local";
  choice.runs_dir = (home.dir / "runs").string();
  CHECK_THROWS_WITH(run_tune(c, choice, {"hpclaunch", "tune"}),
                    Catch::Contains("the local backend runs one node"));
  // A grid value the profile rejects names the candidate.
  fs::path grid = home.dir / "grid.json";
  std::ofstream(grid) << R"({"variables": {"NCCL_P2P_DISABLE": [0, 2]}})";
  c.grid_file = grid.string();
  choice.kind = "slurm";
  test::ScriptedBackend backend = bench_backend();
  CHECK_THROWS_WITH(run_tune(c, choice, {"hpclaunch", "tune"}, &backend),
                    Catch::Contains("candidate c2 (NCCL_P2P_DISABLE=2)") &&
                        Catch::Contains("is not 0, 1 or auto"));
  CHECK(backend.submitted.empty());
  c.grid_file = (home.dir / "missing.json").string();
  CHECK_THROWS_WITH(run_tune(c, choice, {"hpclaunch", "tune"}, &backend),
                    Catch::Contains("no such grid file"));
  CHECK_FALSE(fs::exists(home.dir / "config/hpclaunch/clusters"));
}
