// Hostile and careless input files (issue 17): every kind of file hpclaunch reads, given as
// something that is not a regular file or is too large, and JSON that a reader would otherwise
// take silently (a key given twice, a NUL byte, numbers out of range, nesting without end).
// Each case goes through check_all (bad_input.h): exit status 2, one line that names the file
// or flag and the fix, nothing written, and no hang (the harness waits 20 s at most).
// docs/security-inputs.md states the rules; hostile_inputs_values_test.cc holds the numbers,
// names, sbatch options and host lists.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "bad_input.h"
#include "input_file.h"
#include "json_file.h"

using namespace cli_test;

namespace {

// One kind of input file: where it lives in the sandbox, the command that reads it, and how
// the error names it.
struct InputKind {
  std::string name;
  std::string path;  // relative to the sandbox root
  std::vector<std::string> args;
  std::string shown;  // the start of the error line's "where"
  std::string noun;   // "JSON file", "template", ...
};

std::vector<InputKind> input_kinds() {
  const std::string user = "{root}/xdg/hpclaunch/";
  return {
      {"./hpclaunch.json", kProject, render_args({}), "error: hpclaunch.json: ", "JSON file"},
      {"--project FILE", "work/p.json", render_args({"--project", "p.json"}),
       "error: p.json: ", "JSON file"},
      {"the user's defaults.json", "xdg/hpclaunch/defaults.json", render_args({}),
       user + "defaults.json: ", "JSON file"},
      {"defaults.json on HPCLAUNCH_PATH", "hp1/defaults.json", render_args({}),
       "{root}/hp1/defaults.json: ", "JSON file"},
      {"a user preset", "xdg/hpclaunch/shapes/mine.json", render_args({}, "mine"),
       user + "shapes/mine.json: ", "JSON file"},
      {"a cluster profile on HPCLAUNCH_PATH", "hp1/clusters/c.json",
       render_args({"--cluster", "c"}), "{root}/hp1/clusters/c.json: ", "JSON file"},
      {"--template FILE", "work/t.mustache", render_args({"--template", "t.mustache"}),
       "error: t.mustache: ", "template"},
      {"the user's template", "xdg/hpclaunch/templates/sbatch.sh.mustache", render_args({}),
       user + "templates/sbatch.sh.mustache: ", "template"},
      {"tune --grid FILE",
       "work/g.json",
       {"tune", "--grid", "g.json", "--local", "-p", "1n1g"},
       "error: g.json: ",
       "JSON file"},
      {"sweep --file FILE",
       "work/s.json",
       {"sweep", "--file", "s.json", "--local"},
       "error: s.json: ",
       "JSON file"},
      // libssh would wait on a FIFO and read /dev/zero without end: checked before it opens it.
      {"--ssh-config FILE",
       "work/ssh_config",
       {"submit", "--preset", "1n1g", "--strategy", "ddp", "--host", "login", "--ssh-config",
        "ssh_config"},
       "error: ssh_config: ",
       "SSH config file"},
      {"a sweep's results.csv",
       "work/sw/results.csv",
       {"report", "sw"},
       "error: sw/results.csv: ",
       "results file"},
      {"validate --script FILE",
       "work/job.sbatch",
       {"validate", "--script", "job.sbatch"},
       "error: job.sbatch: ",
       "script file"},
  };
}

// What the input is instead of a regular file, and what the error must say about it.
struct BadType {
  std::string name;
  std::string content;  // a BadCase file content: "<dir>", "<fifo>", "<link>TARGET", or text
  std::vector<std::string> expect;
};

std::vector<BadType> bad_types(const InputKind& kind) {
  return {
      {"a dangling symbolic link",
       "<link>{root}/nowhere",
       {"is a symbolic link to \"{root}/nowhere\", which does not exist", "point the link"}},
      {"a symbolic link loop",
       "<link>{root}/" + kind.path,
       {"is a symbolic link loop, not a " + kind.noun, "point the link at a regular file"}},
      {"a directory", "<dir>", {"is a directory, not a " + kind.noun, "replace it"}},
      {"a FIFO", "<fifo>", {"is a FIFO (named pipe), not a " + kind.noun, "replace it"}},
      {"a link to /dev/zero",
       "<link>/dev/zero",
       {"is a character device, not a " + kind.noun, "name a regular file instead"}},
  };
}

// A case whose input is ./hpclaunch.json, read by a plain render.
BadCase project(std::string name, std::string content, std::vector<std::string> expect) {
  return {std::move(name), render_args({}), {{kProject, std::move(content)}}, std::move(expect)};
}

// A case with one input file at `path` (relative to the sandbox root).
BadCase with_file(std::string name, std::vector<std::string> args, std::string path,
                  std::string content, std::vector<std::string> expect) {
  return {
      std::move(name), std::move(args), {{std::move(path), std::move(content)}}, std::move(expect)};
}

}  // namespace

TEST_CASE("hostile inputs: input files that are not regular files are named, never skipped",
          "[hostile-inputs]") {
  std::vector<BadCase> cases;
  for (const auto& kind : input_kinds()) {
    for (const auto& type : bad_types(kind)) {
      std::vector<std::string> expect = {kind.shown};
      expect.insert(expect.end(), type.expect.begin(), type.expect.end());
      cases.push_back(
          {kind.name + " is " + type.name, kind.args, {{kind.path, type.content}}, expect});
    }
  }
  CHECK(cases.size() == 65);
  check_all(cases);
}

TEST_CASE("hostile inputs: input files over the size limit are refused before they are read",
          "[hostile-inputs]") {
  const std::string big(hpc::kMaxInputFileBytes + 1, ' ');
  std::vector<BadCase> cases;
  for (const auto& kind : input_kinds()) {
    if (kind.noun == "results file") continue;  // its own limit, below
    cases.push_back({kind.name + " over 4 MiB",
                     kind.args,
                     {{kind.path, big}},
                     {kind.shown, "is 4194305 bytes, more than the 4 MiB a " + kind.noun,
                      "check the file (hpclaunch reads at most 4 MiB of it)"}});
  }
  cases.push_back({"a sweep's results.csv over 16 MiB",
                   {"report", "sw"},
                   {{"work/sw/results.csv", std::string(hpc::kMaxResultsFileBytes + 1, '\n')}},
                   {"sw/results.csv: ", "more than the 16 MiB a results file may have"}});
  for (const auto& [flag, noun] : {std::pair<std::string, std::string>{"--project", "JSON file"},
                                   {"--template", "template"}}) {
    cases.push_back({flag + " /dev/zero itself",
                     render_args({flag, "/dev/zero"}),
                     {},
                     {"/dev/zero: is a character device, not a " + noun, "name a regular file"}});
  }
  check_all(cases);
}

TEST_CASE("hostile inputs: a key given twice in one JSON object is an error with both places",
          "[hostile-inputs]") {
  check_all({
      project("./hpclaunch.json sets \"shape\" twice (the first was dropped)",
              "{\"shape\": {\"nodes\": 4}, \"shape\": {\"time\": \"00:10:00\"}}",
              {"hpclaunch.json:1:25:", "key \"shape\" is given twice in one object (first at 1:2)",
               "remove one, or merge the two"}),
      project("a nested key twice, on separate lines",
              "{\n  \"job\": {\n    \"name\": \"a\",\n    \"name\": \"b\"\n  }\n}\n",
              {"hpclaunch.json:4:5:", "key \"name\" is given twice", "(first at 3:5)"}),
      project("the same key written with an escape",
              "{\"job\": {\"name\": \"a\", \"n\\u0061me\": \"b\"}}",
              {"hpclaunch.json:1:23:", "key \"name\" is given twice"}),
      project("a key twice after a comment that holds braces",
              "{ /* { \"job\": */ \"job\": {}, // }\n \"job\": {} }",
              {"hpclaunch.json:2:2:", "key \"job\" is given twice"}),
      with_file("a user preset sets nodes twice", render_args({}, "mine"),
                "xdg/hpclaunch/shapes/mine.json", "{\"nodes\": 1, \"nodes\": 2}",
                {"{root}/xdg/hpclaunch/shapes/mine.json:1:14:", "key \"nodes\" is given twice"}),
      with_file("a cluster profile lists an NCCL variable twice", render_args({"--cluster", "c"}),
                "hp1/clusters/c.json",
                "{\"nccl\": {\"NCCL_X\": {\"value\": 1, \"reason\": \"a\"},\n"
                "          \"NCCL_X\": {\"value\": 2, \"reason\": \"b\"}}}",
                {"{root}/hp1/clusters/c.json:2:11:", "key \"NCCL_X\" is given twice"}),
      with_file("the user's defaults.json", render_args({}), "xdg/hpclaunch/defaults.json",
                "{\"preset\": \"1n1g\", \"preset\": \"1n2g\"}",
                {"{root}/xdg/hpclaunch/defaults.json:1:20:", "key \"preset\" is given twice"}),
      BadCase{"a --set value given as JSON",
              render_args(
                  {"--set", "profile.env={\"A\": {\"value\": \"1\"}, \"A\": {\"value\": \"2\"}}"}),
              {},
              {"--set profile.env:1:23:", "key \"A\" is given twice"}},
      with_file("a tune grid names a variable twice",
                {"tune", "--grid", "g.json", "--local", "-p", "1n1g"}, "work/g.json",
                "{\"variables\": {\"NCCL_ALGO\": [\"Ring\"], \"NCCL_ALGO\": [\"Tree\"]}}",
                {"g.json:1:39:", "key \"NCCL_ALGO\" is given twice"}),
      with_file("a sweep file sets steps twice", {"sweep", "--file", "s.json", "--local"},
                "work/s.json", "{\"steps\": 10, \"steps\": 0}",
                {"s.json:1:15:", "key \"steps\" is given twice"}),
  });
}

TEST_CASE("hostile inputs: a NUL byte in a JSON file is an error, not the end of the file",
          "[hostile-inputs]") {
  using namespace std::string_literals;
  check_all({
      project("NUL after the object (what follows was ignored)",
              "{\"job\": {\"name\": \"x\"}}\0{\"shape\": {\"nodes\": 9}}"s,
              {"hpclaunch.json:1:23:", "a NUL byte", "remove it"}),
      project("NUL as the first byte", "\0{}"s, {"hpclaunch.json:1:1:", "a NUL byte"}),
      project("NUL inside a string", "{\"job\": {\"name\": \"a\0b\"}}"s,
              {"hpclaunch.json:1:20:", "a NUL byte"}),
      project("NUL inside a comment, on line 2", "{\n// a\0b\n}"s,
              {"hpclaunch.json:2:5:", "a NUL byte"}),
      with_file("NUL in a user preset", render_args({}, "mine"), "xdg/hpclaunch/shapes/mine.json",
                "{\"nodes\": 1}\0"s, {"{root}/xdg/hpclaunch/shapes/mine.json:1:13:", "a NUL byte"}),
  });
}

TEST_CASE("hostile inputs: numbers in JSON files out of any range are named, not wrapped",
          "[hostile-inputs]") {
  const std::string digits400(400, '9');
  check_all({
      project(
          "1e400 (was an internal error)", "{\"shape\": {\"nodes\": 1e400}}",
          {"hpclaunch.json:1:21:", "the number 1e400 is out of range", "write a smaller number"}),
      project("-1e400", "{\"job\": {\"srun_wait\": -1e400}}",
              {"hpclaunch.json:1:23:", "the number -1e400 is out of range"}),
      project("an integer of 400 digits", "{\"shape\": {\"nodes\": " + digits400 + "}}",
              {"hpclaunch.json:1:21:", "is out of range"}),
      with_file("1e400 in a tune grid", {"tune", "--grid", "g.json", "--local", "-p", "1n1g"},
                "work/g.json", "{\"variables\": {\"NCCL_X\": [1e400]}}",
                {"g.json:1:27:", "the number 1e400 is out of range"}),
      project("2^64-1 as shape.nodes (was shown as -1)",
              "{\"shape\": {\"nodes\": 18446744073709551615}}",
              {"hpclaunch.json: shape.nodes: 18446744073709551615 is out of range (between 1 and"}),
      project("2^64-1 as profile.port_range.min",
              "{\"profile\": {\"port_range\": {\"min\": 18446744073709551615}}}",
              {"profile.port_range.min: 18446744073709551615 is out of range"}),
      project("2^63 as job.srun_wait", "{\"job\": {\"srun_wait\": 9223372036854775808}}",
              {"job.srun_wait: 9223372036854775808 is out of range"}),
      project("2^64 (no longer an integer) as shape.nodes",
              "{\"shape\": {\"nodes\": 18446744073709551616}}",
              {"shape.nodes: expected an integer, got the number"}),
      with_file("a sweep file's steps of 2^64-1", {"sweep", "--file", "s.json", "--local"},
                "work/s.json", "{\"steps\": 18446744073709551615}",
                {"s.json: steps: 18446744073709551615 is out of range", "write a smaller number"}),
      with_file("a sweep file's max_concurrent of 2^32+1 (was read as 1)",
                {"sweep", "--file", "s.json", "--local"}, "work/s.json",
                "{\"max_concurrent\": 4294967297}",
                {"s.json: max_concurrent: 4294967297 is out of range"}),
  });
}

TEST_CASE("hostile inputs: JSON nested without end is refused before anything walks it",
          "[hostile-inputs]") {
  auto nested = [](int depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  check_all({
      project("65 levels in profile.tuning.candidates",
              "{\"profile\": {\"tuning\": {\"candidates\": " + nested(62) + "}}}",
              {"hpclaunch.json:1:", "nested deeper than 64 levels", "check the brackets"}),
      project("a million levels (would overflow the stack of a recursive walk)",
              "{\"job\": " + nested(1000000) + "}",
              {"hpclaunch.json:1:72:", "nested deeper than 64 levels"}),
      with_file("a million levels in a tune grid",
                {"tune", "--grid", "g.json", "--local", "-p", "1n1g"}, "work/g.json",
                nested(1000000), {"g.json:1:65:", "nested deeper than 64 levels"}),
  });
}
