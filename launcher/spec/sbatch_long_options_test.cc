// resolve_sbatch_long_option: sbatch's getopt_long rules over Slurm 22.05's table.
// (tests/cli/hostile_inputs_sbatch_test.cc asks the real sbatch the same questions.)
#include "spec/sbatch_long_options.h"

#include <catch2/catch.hpp>
#include <set>
#include <string>

using hpc::resolve_sbatch_long_option;
using hpc::SbatchOptionMatch;

TEST_CASE("sbatch long options: the table", "[sbatch-options]") {
  const auto& all = hpc::sbatch_long_options();
  CHECK(all.size() == 106);
  std::set<std::string> names;
  for (const auto& o : all) CHECK(names.insert(o.name).second);  // no name twice
  CHECK(names.count("ntasks-per-node"));
  CHECK(names.count("tasks-per-node"));
}

TEST_CASE("sbatch long options: exact names, prefixes, aliases, ambiguity", "[sbatch-options]") {
  auto canonical = [](const char* written) {
    const SbatchOptionMatch m = resolve_sbatch_long_option(written);
    return m.option ? m.option->canonical : std::string("?");
  };
  CHECK(resolve_sbatch_long_option("partition").kind == SbatchOptionMatch::Exact);
  CHECK(resolve_sbatch_long_option("partitio").kind == SbatchOptionMatch::Prefix);
  CHECK(canonical("partitio") == "partition");
  CHECK(canonical("accoun") == "account");
  CHECK(canonical("job-nam") == "job-name");
  CHECK(canonical("tasks-per-node") == "ntasks-per-node");
  CHECK(canonical("ta") == "ntasks-per-node");  // a prefix of the alias
  // An exact name wins over the longer names it begins.
  CHECK(canonical("mem") == "mem");
  CHECK(canonical("time") == "time");
  CHECK(canonical("gpus") == "gpus");
  CHECK(canonical("cluster") == "cluster");
  const SbatchOptionMatch tim = resolve_sbatch_long_option("tim");
  CHECK(tim.kind == SbatchOptionMatch::Ambiguous);
  CHECK(tim.candidates == std::vector<std::string>{"time", "time-min"});
  CHECK(resolve_sbatch_long_option("p").kind == SbatchOptionMatch::Ambiguous);
  CHECK(resolve_sbatch_long_option("partitions").kind == SbatchOptionMatch::Unknown);
  CHECK(resolve_sbatch_long_option("tres-per-task").kind == SbatchOptionMatch::Unknown);
  CHECK(resolve_sbatch_long_option("").kind == SbatchOptionMatch::Unknown);
  CHECK(resolve_sbatch_long_option("wait").option->argument == hpc::SbatchOptionValue::None);
}

TEST_CASE("sbatch long options: every prefix of every name resolves as getopt_long would",
          "[sbatch-options]") {
  const auto& all = hpc::sbatch_long_options();
  for (const auto& o : all) {
    for (std::size_t n = 1; n <= o.name.size(); ++n) {
      const std::string prefix = o.name.substr(0, n);
      std::size_t starting = 0;
      bool exact = false;
      for (const auto& other : all) {
        starting += other.name.rfind(prefix, 0) == 0;
        exact = exact || other.name == prefix;
      }
      const SbatchOptionMatch m = resolve_sbatch_long_option(prefix);
      INFO(prefix);
      if (exact)
        CHECK(m.kind == SbatchOptionMatch::Exact);
      else if (starting == 1)
        CHECK((m.kind == SbatchOptionMatch::Prefix && m.option->name == o.name));
      else
        CHECK((m.kind == SbatchOptionMatch::Ambiguous && m.candidates.size() == starting));
    }
  }
}
