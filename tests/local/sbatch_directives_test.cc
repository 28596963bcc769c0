// How the local backend reads #SBATCH lines (as sbatch does) and expands Slurm's filename
// patterns. No processes are started here.
#include <signal.h>

#include <catch2/catch.hpp>

#include "backends/local_backend.h"
#include "error.h"

using hpc::parse_sbatch_options;
using hpc::sbatch_script_arguments;

namespace {

std::vector<std::string> texts(const std::string& script) {
  std::vector<std::string> out;
  for (const auto& a : sbatch_script_arguments(script)) out.push_back(a.text);
  return out;
}

}  // namespace

TEST_CASE("sbatch arguments: quotes, escapes, comments, and where the directives end") {
  CHECK(texts("#!/bin/bash\n#SBATCH --job-name=\"a b\" -N 1\n") ==
        std::vector<std::string>{"--job-name=a b", "-N", "1"});
  CHECK(texts("#SBATCH --job-name='it''s'\n") == std::vector<std::string>{"--job-name=its"});
  CHECK(texts("#SBATCH --job-name=\"say \\\"hi\\\" \\\\ ok\"\n") ==
        std::vector<std::string>{"--job-name=say \"hi\" \\ ok"});
  // sbatch looks for whitespace before it looks at a backslash: "a\ b" is two arguments.
  CHECK(texts("#SBATCH --job-name=a\\ b\n") == std::vector<std::string>{"--job-name=a", "b"});
  // An unquoted # starts a comment; a quoted one is text.
  CHECK(texts("#SBATCH --time=5 # five minutes\n#SBATCH --job-name=\"x#y\"\n") ==
        std::vector<std::string>{"--time=5", "--job-name=x#y"});
  CHECK(texts("#SBATCH --time=5#comment\n") == std::vector<std::string>{"--time=5"});
  // Blank lines and comments are skipped; the first command ends the directives.
  CHECK(texts("#!/bin/bash\n\n# note\n  # indented note\n#SBATCH -N 1\nset -e\n#SBATCH -N 2\n") ==
        std::vector<std::string>{"-N", "1"});
  // Only "#SBATCH" at the start of a line counts.
  CHECK(texts(" #SBATCH -N 3\n##SBATCH -N 4\n#SBATCH -N 1\n") ==
        std::vector<std::string>{"-N", "1"});
  auto args = sbatch_script_arguments("#!/bin/bash\n#SBATCH -J x\n\n#SBATCH --time=1\n");
  REQUIRE(args.size() == 3);
  CHECK(args[0].line == 2);
  CHECK(args[2].line == 4);
}

TEST_CASE("sbatch options the local backend honours") {
  auto o = parse_sbatch_options(
      "#!/bin/bash\n"
      "#SBATCH --job-name=\"my job\"\n"
      "#SBATCH --nodes=1 --ntasks-per-node=4\n"
      "#SBATCH -c 3 --gpus-per-node=4 --partition gpu\n"
      "#SBATCH --time=01:02:03\n"
      "#SBATCH --output=%x-%j.out --error err-%j.txt --open-mode=append\n"
      "#SBATCH --signal=B:USR1@90 --requeue\n"
      "echo hi\n");
  CHECK(o.job_name == "my job");
  CHECK(o.nodes == 1);
  CHECK(o.ntasks_per_node == 4);
  CHECK(o.tasks() == 4);
  CHECK(o.cpus_per_task == 3);
  CHECK(o.time_limit_seconds == 3723);
  CHECK(o.output == "%x-%j.out");
  CHECK(o.error == "err-%j.txt");
  CHECK(o.open_mode_append);
  CHECK(o.signal_number == SIGUSR1);
  CHECK(o.signal_seconds == 90);
  CHECK(o.signal_batch_only);
  CHECK(o.requeue);

  auto short_forms = parse_sbatch_options("#SBATCH -J a -N2-4 -n 6 -t 0:30 --signal=SIGUSR2\n");
  CHECK(short_forms.job_name == "a");
  CHECK(short_forms.nodes == 2);
  CHECK(short_forms.tasks() == 6);
  CHECK(short_forms.time_limit_seconds == 30);
  CHECK(short_forms.signal_number == SIGUSR2);
  CHECK(short_forms.signal_seconds == 60);  // Slurm's default
  CHECK_FALSE(short_forms.signal_batch_only);

  // The last directive wins, as with getopt.
  CHECK(parse_sbatch_options("#SBATCH -J a\n#SBATCH --job-name=b\n").job_name == "b");
  CHECK(parse_sbatch_options("#SBATCH --time=UNLIMITED\n").time_limit_seconds == -1);
  CHECK(parse_sbatch_options("echo\n#SBATCH --nodes=4\n").nodes == 1);
}

TEST_CASE("sbatch values the local backend cannot read name the line") {
  CHECK_THROWS_WITH(parse_sbatch_options("#!/bin/bash\n#SBATCH --nodes=abc\n", "job.sbatch"),
                    Catch::Contains("job.sbatch:2") && Catch::Contains("--nodes"));
  CHECK_THROWS_AS(parse_sbatch_options("#SBATCH --time=soon\n"), hpc::UserError);
  CHECK_THROWS_WITH(parse_sbatch_options("#SBATCH --signal=B:FOO@5\n"), Catch::Contains("FOO"));
  CHECK_THROWS_AS(parse_sbatch_options("#SBATCH --job-name\n"), hpc::UserError);
}

TEST_CASE("Slurm filename patterns") {
  hpc::SlurmFilenameContext c{"42", "train", "alice", "localhost"};
  CHECK(hpc::expand_slurm_filename("%x-%j.out", c) == "train-42.out");
  CHECK(hpc::expand_slurm_filename("slurm-%j.out", c) == "slurm-42.out");
  CHECK(hpc::expand_slurm_filename("%u/%N.%n.%t.%s", c) == "alice/localhost.0.0.batch");
  CHECK(hpc::expand_slurm_filename("%5j-%%-%A", c) == "00042-%-42");
  CHECK(hpc::expand_slurm_filename("odd-%q-%", c) == "odd-%q-%");
  CHECK(hpc::expand_slurm_filename("literal\\%j", c) == "literal%j");  // a backslash: no patterns
}
