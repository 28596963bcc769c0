// sbatch_extra's option names against the real sbatch of the test cluster (Slurm 22.05): sbatch
// reads "--partitio=" as --partition, so hpclaunch must too (spec/sbatch_long_options.h). Every
// prefix of every long option is asked of sbatch and of resolve_sbatch_long_option, and the two
// must agree: ambiguous, unknown, or which option it is.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "harness.h"
#include "spec/sbatch_long_options.h"
#include "support/prerequisite.h"

using namespace cli_test;
using hpc::SbatchOptionMatch;

namespace {

// The test cluster's sbatch, asked from a sandbox.
struct SbatchProbe {
  std::string sbatch = find_program("sbatch");
  Sandbox sb;
  std::vector<std::string> env = sb.env();

  // What is missing for the probe ("" when nothing): sbatch, SLURM_CONF, and with
  // `controller` a slurmctld that answers scontrol ping.
  std::string missing(bool controller) {
    const char* conf = std::getenv("SLURM_CONF");
    if (!conf || !*conf || sbatch.empty()) return "no sbatch or SLURM_CONF for the test cluster";
    env.push_back(std::string("SLURM_CONF=") + conf);
    const std::string scontrol = find_program("scontrol");
    const bool up = !scontrol.empty() &&
                    spawn({scontrol, "ping"}, sb.work(), env, std::chrono::seconds(10)).status == 0;
    return controller && !up ? "the test cluster's controller does not answer scontrol ping" : "";
  }

  Run test_only(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {sbatch, "--test-only"};
    argv.insert(argv.end(), args.begin(), args.end());
    return spawn(argv, sb.work(), env, std::chrono::seconds(30));
  }

  // The first line sbatch prints for these arguments. --test-only first: nothing is ever
  // submitted; the script comes from stdin, which is /dev/null.
  std::string first_line(const std::vector<std::string>& args) {
    Run r = test_only(args);
    std::string all = r.err + r.out;
    return all.substr(0, all.find('\n'));
  }
};

// The option names in getopt_long's "option '--p' is ambiguous; possibilities: '--a' '--b'".
std::set<std::string> possibilities(const std::string& line) {
  std::set<std::string> names;
  const std::string list = line.substr(line.find("possibilities:"));
  static const std::regex quoted("'--([a-z0-9-]+)'");
  for (std::sregex_iterator it(list.begin(), list.end(), quoted), end; it != end; ++it)
    names.insert((*it)[1]);
  return names;
}

// The option getopt_long names in "option '--NAME' requires an argument" and the like.
std::string named_option(const std::string& line) {
  static const std::regex named("option '--([a-z0-9-]+)' (requires|doesn't allow) an argument");
  std::smatch m;
  return std::regex_search(line, m, named) ? m[1].str() : "";
}

}  // namespace

TEST_CASE("hostile inputs: sbatch reads every option prefix as hpclaunch resolves it",
          "[hostile-inputs][sbatch]") {
  SbatchProbe probe;
  if (std::string why = probe.missing(false); !why.empty())
    return hpc::test::missing_prerequisite(why);

  std::set<std::string> prefixes;
  for (const auto& o : hpc::sbatch_long_options())
    for (std::size_t n = 1; n <= o.name.size(); ++n) prefixes.insert(o.name.substr(0, n));
  for (const char* unknown : {"partitions", "tres-per-task", "x", "nodes-x", "f"})
    prefixes.insert(unknown);
  int ambiguous = 0, resolved = 0, identified = 0, unknown = 0;
  for (const auto& prefix : prefixes) {
    const SbatchOptionMatch ours = hpc::resolve_sbatch_long_option(prefix);
    // A --wrap would give sbatch a script to test with the controller; it resolves like any.
    if (ours.option && ours.option->name == "wrap") continue;
    const std::string line = probe.first_line({"--" + prefix + "=zzqq"});
    INFO("--" << prefix << ": sbatch says: " << line);
    if (line.find("is ambiguous") != std::string::npos) {
      CHECK(ours.kind == SbatchOptionMatch::Ambiguous);
      CHECK(possibilities(line) ==
            std::set<std::string>(ours.candidates.begin(), ours.candidates.end()));
      ++ambiguous;
    } else if (line.find("unrecognized option") != std::string::npos) {
      CHECK(ours.kind == SbatchOptionMatch::Unknown);
      ++unknown;
    } else {
      REQUIRE(ours.option != nullptr);
      ++resolved;
      std::string named = named_option(line);  // "doesn't allow an argument" names it
      if (named.empty() && ours.option->argument == hpc::SbatchOptionValue::Required)
        named = named_option(probe.first_line({"--" + prefix}));  // "requires an argument"
      if (!named.empty()) {
        CHECK(named == ours.option->name);
        ++identified;
      }
    }
  }
  WARN(prefixes.size() << " names asked of sbatch: " << ambiguous << " ambiguous, " << resolved
                       << " resolved (" << identified << " of them named by sbatch), " << unknown
                       << " unknown");
  CHECK(ambiguous >= 100);
  CHECK(identified >= 500);
  CHECK(unknown == 5);
}

TEST_CASE("hostile inputs: sbatch takes an abbreviated #SBATCH option over the full one",
          "[hostile-inputs][sbatch]") {
  // Why the names are resolved: a later "--partitio=" in the script overrides --partition.
  SbatchProbe probe;
  if (std::string why = probe.missing(true); !why.empty())
    return hpc::test::missing_prerequisite(why);
  probe.sb.write("work/job.sbatch",
                 "#!/bin/bash\n#SBATCH --time=1\n#SBATCH --partitio=no-such-partition\ntrue\n");
  Run r = probe.test_only({"job.sbatch"});
  INFO(r.describe());
  CHECK(r.status != 0);
  CHECK(r.err.find("Invalid partition") != std::string::npos);
}
