// Hostile and careless values (issue 17): numbers in flags and --set under one plain-number rule,
// names of presets, profiles and the data directory, sbatch options under the abbreviations and
// aliases sbatch accepts, and host lists Slurm rejects. Table-driven through check_all
// (bad_input.h): exit 2, one line naming the flag or file and the fix, nothing written.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "bad_input.h"

using namespace cli_test;

namespace {

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// A --set of profile.sbatch_extra to the single entry `option`.
std::vector<std::string> extra(const std::string& option) {
  return render_args({"--set", "profile.sbatch_extra=[\"" + option + "\"]"});
}

}  // namespace

TEST_CASE("hostile inputs: --set numbers follow the plain-number rule", "[hostile-inputs]") {
  std::vector<BadCase> cases;
  // Each was read as a number before ("+2", " 2", "010" by strtoll), or is now refused alike.
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"+2", "write 2"},  {" 2", "write 2"},  {"2 ", "write 2"}, {"010", "write 10"},
      {"0x10", "e.g. 4"}, {"1e3", "e.g. 4"},  {"2.0", "e.g. 4"}, {"", "e.g. 4"},
      {"-", "e.g. 4"},    {"\t3", "write 3"}, {"00", "write 0"}};
  for (const auto& [text, fix] : refused) {
    cases.push_back({"--set shape.nodes=\"" + text + "\"",
                     render_args({"--set", "shape.nodes=" + text}),
                     {},
                     {"--set shape.nodes: expected an integer", fix, "plain decimal digits"}});
  }
  // A plain number is read, then checked against the key's range.
  for (const auto& [assignment, what] : std::vector<std::pair<std::string, std::string>>{
           {"job.srun_wait=99999999999999999999",
            "job.srun_wait: 99999999999999999999 is out of "
            "range; write a smaller number"},
           {"shape.nodes=-2", "shape.nodes: -2 is out of range (between 1 and 100000)"},
           {"job.hang_seconds=-1", "job.hang_seconds: -1 is out of range (between 0 and 604800)"},
           {"job.hang_seconds=5", "job.hang_seconds: 5 s is too short"}}) {
    cases.push_back({"--set " + assignment, render_args({"--set", assignment}), {}, {what}});
  }
  check_all(cases);
}

TEST_CASE("hostile inputs: number flags follow the same rule as --set", "[hostile-inputs]") {
  const std::vector<std::string> sweep = {"sweep", "--presets", "1n1g", "--local"};
  const std::vector<std::string> tune = {"tune", "-p", "1n1g", "--local"};
  // CLI11 read these with strtoll(base 0): "010" was 8, "0x10" 16, "+2" and " 2" were 2.
  check_all({
      {"sweep --steps +2", with(sweep, {"--steps", "+2"}), {}, {"--steps: \"+2\"", "write 2"}},
      {"sweep --steps 010 (was 8)",
       with(sweep, {"--steps", "010"}),
       {},
       {"--steps: \"010\" is not a whole number", "write 10"}},
      {"sweep --max-concurrent 0x10",
       with(sweep, {"--max-concurrent", "0x10"}),
       {},
       {"--max-concurrent: \"0x10\"", "plain decimal digits"}},
      {"sweep --warmup-steps \" 3\"", with(sweep, {"--warmup-steps", " 3"}), {}, {"write 3"}},
      {"sweep --start-timeout \"60 \"",
       with(sweep, {"--start-timeout", "60 "}),
       {},
       {"--start-timeout", "write 60"}},
      {"sweep --poll 1e400", with(sweep, {"--poll", "1e400"}), {}, {"--poll: \"1e400\""}},
      {"sweep --poll .5", with(sweep, {"--poll", ".5"}), {}, {"--poll: \".5\" is not a number"}},
      {"sweep --poll inf", with(sweep, {"--poll", "inf"}), {}, {"--poll: \"inf\""}},
      {"sweep --poll nan", with(sweep, {"--poll", "nan"}), {}, {"--poll: \"nan\""}},
      {"tune --iters 010", with(tune, {"--iters", "010"}), {}, {"--iters", "write 10"}},
      {"tune --max-candidates +4",
       with(tune, {"--max-candidates", "+4"}),
       {},
       {"--max-candidates", "write 4"}},
      {"tune --timeout 1e3", with(tune, {"--timeout", "1e3"}), {}, {"--timeout: \"1e3\""}},
      {"tune --poll 0x1p3", with(tune, {"--poll", "0x1p3"}), {}, {"--poll: \"0x1p3\""}},
      {"logs --rank +0", {"logs", "--rank", "+0", "1"}, {}, {"--rank: \"+0\"", "write 0"}},
  });
}

TEST_CASE("hostile inputs: names that cannot be presets are named with what gave them",
          "[hostile-inputs]") {
  check_all({
      {"--preset with a space", render_args({}, "my preset"), {}, {"--preset: \"my preset\""}},
      {"--cluster with a path", render_args({"--cluster", "../x"}), {}, {"--cluster: \"../x\""}},
      {"--preset hidden", render_args({}, ".x"), {}, {"--preset: \".x\" is not a valid"}},
      {"presets show NAME (was blamed on --preset)",
       {"presets", "show", "a b"},
       {},
       {"presets show: \"a b\" is not a valid preset name", "use letters"}},
      {"clusters show NAME",
       {"clusters", "show", "a/b"},
       {},
       {"clusters show: \"a/b\" is not a valid cluster profile name"}},
      {"clusters diff A B",
       {"clusters", "diff", "jsc", "x y"},
       {},
       {"clusters diff B: \"x y\" is not a valid cluster profile name"}},
      {"extends names an invalid preset",
       render_args({}, "mine"),
       {{"xdg/hpclaunch/shapes/mine.json", "{\"extends\": \"a b\"}"}},
       {"{root}/xdg/hpclaunch/shapes/mine.json: extends: \"a b\" is not a valid preset name"}},
      {"a preset that is a dangling link does not fall through to \"no preset named\"",
       render_args({}, "1n1g"),
       {{"xdg/hpclaunch/shapes/1n1g.json", "<link>{root}/gone.json"}},
       {"{root}/xdg/hpclaunch/shapes/1n1g.json: is a symbolic link to"}},
      {"HPCLAUNCH_DATA_DIR that does not exist (was \"no cluster chosen\")",
       render_args({}),
       {},
       {"HPCLAUNCH_DATA_DIR={root}/nowhere: not a hpclaunch data directory", "set it to"},
       {"HPCLAUNCH_DATA_DIR={root}/nowhere"}},
      {"HPCLAUNCH_DATA_DIR that is an empty directory",
       {"presets", "list"},
       {{"data", "<dir>"}},
       {"HPCLAUNCH_DATA_DIR={root}/data: not a hpclaunch data directory"},
       {"HPCLAUNCH_DATA_DIR={root}/data"}},
      {"HPCLAUNCH_DATA_DIR that is a file",
       {"clusters", "list"},
       {{"data", "{}"}},
       {"HPCLAUNCH_DATA_DIR={root}/data: not a hpclaunch data directory"},
       {"HPCLAUNCH_DATA_DIR={root}/data"}},
      {"HPCLAUNCH_DATA_DIR whose defaults.json is a directory",
       render_args({}),
       {{"data/presets/defaults.json", "<dir>"}},
       {"presets/defaults.json: is a directory, not a JSON file"},
       {"HPCLAUNCH_DATA_DIR={root}/data"}},
  });
}

TEST_CASE("hostile inputs: presets list and clusters list skip what cannot be a preset, by name",
          "[hostile-inputs]") {
  Sandbox sb;
  sb.write("xdg/hpclaunch/shapes/my preset.json", "{}");
  sb.write("xdg/hpclaunch/shapes/a\xff.json", "{}");
  sb.write("xdg/hpclaunch/shapes/notes.txt", "x");
  sb.write("xdg/hpclaunch/shapes/.mine.json.swp", "x");  // hidden: ignored without a word
  sb.write("xdg/hpclaunch/shapes/fine.json", "{\"nodes\": 1, \"gpus_per_node\": 1}");
  fs::create_directories(sb.user_dir() / "shapes" / "dir.json");
  fs::create_symlink(sb.root() / "gone", sb.user_dir() / "shapes" / "dangling.json");
  sb.write("hp1/clusters/x y.json", "{}");
  Run r = sb.hpclaunch({"presets", "list"});
  INFO(r.describe());
  CHECK(r.status == 0);
  CHECK(r.out.find("fine ") != std::string::npos);
  CHECK(r.out.find("1n1g") != std::string::npos);
  const auto lines = split_lines(r.err);
  CHECK(lines.size() == 5);
  for (const auto& line : lines) {
    CHECK(line.rfind("hpclaunch: warning: " + sb.user_dir().string() + "/shapes/", 0) == 0);
    CHECK(line.find(": skipped: ") != std::string::npos);
  }
  CHECK(r.err.find("--preset") == std::string::npos);  // no flag the user never passed
  CHECK(r.err.find("my preset.json: skipped: not a valid preset name; rename it") !=
        std::string::npos);
  CHECK(r.err.find("dir.json: skipped: a directory") != std::string::npos);
  CHECK(r.err.find("dangling.json: skipped: a dangling or looping symbolic link") !=
        std::string::npos);
  CHECK(r.err.find("notes.txt: skipped: not a .json file") != std::string::npos);
  Run c = sb.hpclaunch({"clusters", "list", "--json"});
  INFO(c.describe());
  CHECK(c.status == 0);
  CHECK(c.err == "hpclaunch: warning: " + (sb.hp1() / "clusters" / "x y.json").string() +
                     ": skipped: not a valid cluster profile name; rename it: letters, digits, "
                     "'.', '_', '+' and '-'\n");
}

TEST_CASE("hostile inputs: sbatch_extra options are read as sbatch reads them",
          "[hostile-inputs]") {
  std::vector<BadCase> cases;
  // Abbreviations and the alias that sbatch 22.05 resolves to a managed option.
  const std::vector<std::pair<std::string, std::string>> managed = {
      {"--partitio=x", "--partition"},
      {"--accoun=a", "--account"},
      {"--job-nam=j", "--job-name"},
      {"--tasks-per-node=2", "--ntasks-per-node"},
      {"--ntasks-per-n=2", "--ntasks-per-node"},
      {"--signa=USR1", "--signal"},
      {"--gpus-per-n=1", "--gpus-per-node"},
      {"--requeu", "--requeue"},
      {"--no-req", "--no-requeue"},
      {"--sig=USR1", "--signal"},
      {"--out=x", "--output"},
      {"--err=x", "--error"},
      {"--chd=x", "--chdir"},
      {"--open=append", "--open-mode"},
      {"--reserv=r", "--reservation"},
      {"--qo=q", "--qos"},
      {"--constrain=c", "--constraint"},
      {"--cpus-per-t=2", "--cpus-per-task"}};
  for (const auto& [option, canonical] : managed) {
    const std::string name = option.substr(0, option.find('='));
    cases.push_back({"sbatch_extra " + option,
                     extra(option),
                     {},
                     {"profile.sbatch_extra: " + name + " (sbatch reads it as " + canonical +
                          ") is rendered from the spec",
                      "set it through the spec's own key"}});
  }
  for (const std::string option : {"--nodes=2", "--gres=gpu:1"}) {
    cases.push_back({"sbatch_extra " + option + " by its full name",
                     extra(option),
                     {},
                     {option.substr(0, option.find('=')) + " is rendered from the spec"}});
  }
  // Ambiguous to sbatch: it refuses them, so do we, naming the candidates.
  for (const auto& [option, candidates] : std::vector<std::pair<std::string, std::string>>{
           {"--par=x", "--parsable, --partition"},
           {"--tim=5", "--time, --time-min"},
           {"--nod=2", "--nodefile, --nodelist, --nodes"},
           {"--gre=gpu:1", "--gres, --gres-flags"},
           {"--exclu", "--exclude, --exclusive"},
           {"--mem-per=1G", "--mem-per-cpu, --mem-per-gpu"},
           {"--wai", "--wait, --wait-all-nodes"}}) {
    cases.push_back({"sbatch_extra " + option + " is ambiguous",
                     extra(option),
                     {},
                     {option.substr(0, option.find('=')) + " is ambiguous to sbatch (it could be " +
                          candidates + ")",
                      "write the option's full name"}});
  }
  // Options of hpclaunch's own sbatch call: in a script they change how sbatch answers.
  for (const std::string option : {"--wait", "--test-onl", "--parsable", "--hol", "--vers",
                                   "--usage", "--help", "--wrap=true"}) {
    cases.push_back({"sbatch_extra " + option,
                     extra(option),
                     {},
                     {"belongs to hpclaunch's own sbatch call", "remove it"}});
  }
  cases.push_back({"sbatch_extra --comment without a value (would eat the next directive)",
                   extra("--comment"),
                   {},
                   {"--comment needs a value", "write it as \"--comment=VALUE\""}});
  cases.push_back({"sbatch_extra --contiguous=1 (takes no value)",
                   extra("--contiguous=1"),
                   {},
                   {"--contiguous takes no value", "write it as \"--contiguous\" alone"}});
  cases.push_back({"sbatch_extra --mem beside shape.mem_per_gpu",
                   render_args({"--set", "profile.sbatch_extra=[\"--mem=4G\"]", "--set",
                                "shape.mem_per_gpu=8G"}),
                   {},
                   {"--mem contradicts shape.mem_per_gpu", "use one of them"}});
  cases.push_back({"an abbreviation in a cluster profile file",
                   render_args({"--cluster", "c"}),
                   {{"hp1/clusters/c.json", "{\"sbatch_extra\": [\"--partit=gpu\"]}"}},
                   {"{root}/hp1/clusters/c.json: profile.sbatch_extra: --partit (sbatch reads it "
                    "as --partition) is rendered from the spec"}});
  check_all(cases);
}

TEST_CASE("hostile inputs: host lists scontrol rejects are rejected", "[hostile-inputs]") {
  const std::string after = "after the last ']' (Slurm rejects it); remove it: end the name";
  std::vector<BadCase> cases;
  for (const auto& [expr, what] : std::vector<std::pair<std::string, std::string>>{
           // Text after the last bracket: Slurm 22.05's "Invalid hostlist".
           {"n[1,2]x", "column 7: text \"x\" " + after},
           {"n[1-2]-", "column 7: text \"-\" " + after},
           {"n[1-2]1", "column 7: text \"1\" " + after},
           {"jwb[0001-0002]i", "column 15: text \"i\" " + after},
           {"[1-2]x", "column 6: text \"x\" " + after},
           {"n[1-2]x[3-4]y", "column 13: text \"y\" " + after},
           {"n[1-2].x", "column 7: text \".x\" " + after},
           {"a,n[1]x,b", "column 7: text \"x\" " + after},
           // Broken forms Slurm reads in a way of its own; we name the column.
           {"x[1-2", "column 2: '[' is never closed"},
           {"x]", "column 2: ']' without a matching '['"},
           {"x[1-]", "column 5: range has no high bound"},
           {"x[ 1]", "column 3: a space in a host list"},
           {"a b", "column 2: a space in a host list"},
           {"x[1--2]", "column 5: unexpected '-' in a range"},
           {"x[2-1]", "column 3: range 2-1 has low > high"}}) {
    cases.push_back({"hostlist expand " + expr,
                     {"hostlist", "expand", expr},
                     {},
                     {"hostlist \"" + expr + "\": " + what}});
  }
  // compress reads each argument as a host list, as `scontrol show hostlist` does: what Slurm
  // rejects there is refused as expand refuses it.
  cases.push_back({"hostlist compress of a list Slurm rejects",
                   {"hostlist", "compress", "n[1,2]x"},
                   {},
                   {"hostlist \"n[1,2]x\": column 7: text \"x\" " + after}});
  check_all(cases);
}
