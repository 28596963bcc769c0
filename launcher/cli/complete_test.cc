#include "cli/complete.h"

#include <CLI/CLI.hpp>
#include <catch2/catch.hpp>

namespace hpc {
namespace {

using Words = std::vector<std::string>;

// A command line shaped like hpclaunch's: a verb with value flags and a flag, and presets with
// show NAME; the catalog's names come from the sources.
struct Fixture {
  CLI::App app{"test", "hpclaunch"};
  std::string value;
  std::vector<std::string> values;
  bool flag = false;
  CompletionSources sources{[] {
                              return Words{"1n2g", "2n2g", "2n4g"};
                            },
                            [] {
                              return Words{"generic", "jsc"};
                            }};
  Fixture() {
    auto* render = app.add_subcommand("render", "render");
    render->add_option("--preset,-p", value, "preset");
    render->add_option("--cluster,-c", value, "cluster");
    render->add_option("--strategy,-s", value, "strategy");
    render->add_flag("--no-project", flag, "flag");
    render->add_option("-o,--output", value, "file");
    auto* sweep = app.add_subcommand("sweep", "sweep");
    sweep->add_option("--strategy,--strategies", values, "list");
    auto* presets = app.add_subcommand("presets", "presets");
    presets->add_subcommand("list", "list");
    presets->add_subcommand("show", "show")->add_option("NAME", value, "name");
    app.add_subcommand("__hidden", "")->group("");
  }
  Words complete(Words words) {
    words.insert(words.begin(), "hpclaunch");
    return complete_words(app, words, words.size() - 1, sources);
  }
};

TEST_CASE("completion offers verbs, subcommands and flags of the verb being typed") {
  Fixture f;
  CHECK(f.complete({""}) == Words{"presets", "render", "sweep"});  // the hidden one left out
  CHECK(f.complete({"re"}) == Words{"render"});
  CHECK(f.complete({"presets", ""}) == Words{"list", "show"});
  CHECK(f.complete({"render", "--no"}) == Words{"--no-project"});
  CHECK(f.complete({"render", "--no-project", "--pr"}) == Words{"--preset"});
}

TEST_CASE("completion offers the values of preset, cluster and strategy flags") {
  Fixture f;
  CHECK(f.complete({"render", "--preset", "2n"}) == Words{"2n2g", "2n4g"});
  CHECK(f.complete({"render", "-c", ""}) == Words{"generic", "jsc"});
  CHECK(f.complete({"render", "--strategy", "z"}) == Words{"zero1", "zero2"});
  CHECK(f.complete({"presets", "show", "1"}) == Words{"1n2g"});
  // bash splits --preset=2n at '='; zsh keeps the word whole.
  CHECK(f.complete({"render", "--preset", "=", "2n4"}) == Words{"2n4g"});
  CHECK(f.complete({"render", "--preset=2n4"}) == Words{"--preset=2n4g"});
  // sweep's comma lists: the item after the last comma completes.
  CHECK(f.complete({"sweep", "--strategy", "ddp,fs"}) == Words{"ddp,fsdp"});
}

TEST_CASE("completion offers nothing for files, after -- and after a flag's value") {
  Fixture f;
  CHECK(f.complete({"render", "-o", ""}).empty());  // the shell completes file names
  CHECK(f.complete({"render", "--", "--pr"}).empty());
  CHECK(f.complete({"render", "--preset", "2n2g", "--cl"}) == Words{"--cluster"});
  CHECK(f.complete({"render", "--no-project", ""}).empty());  // a flag takes no value
}

}  // namespace
}  // namespace hpc
