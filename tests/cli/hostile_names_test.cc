// Hostile names in a sweep folder (docs/security.md, "Generated languages"): results.csv is
// shared and edited by hand, and `hpclaunch report DIR` turns it into gnuplot scripts, data
// files and Markdown. A preset or strategy name names files (plots/scaling-STRATEGY.dat), so it
// must keep to a preset file name's characters: anything else is refused with file:line, the
// column, and the fix, nothing written. The other columns are text: escaped for Markdown, and
// never reaching gnuplot. Real gnuplot runs the scripts (gnuplot-nox, scripts/install-deps.sh).
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "hostile_cases.h"
#include "support/prerequisite.h"

using namespace cli_test;
using Catch::Matchers::Contains;

namespace {

// An RFC 4180 field: quoted, quotes doubled, whatever it holds.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

const std::string kResults = "work/sw/results.csv";
const std::string kSecondRow = "1n2g,ddp,1,2,2,COMPLETED,180,,";
const std::string kNameFix = "use letters, digits, '.', '_', '+' and '-'";

// results.csv whose line 2 has `strategy` (or `preset`) as given, a good row after it.
BadCase bad_strategy(const std::string& name, const std::string& strategy) {
  return {name,
          {"report", "sw"},
          {{kResults, results_file({"1n1g," + quoted(strategy) + ",1,1,1,COMPLETED,100,,",
                                    "1n2g," + quoted(strategy) + ",1,2,2,COMPLETED,180,,"})}},
          {"sw/results.csv:2: strategy", "is not a valid name", kNameFix}};
}
BadCase bad_preset(const std::string& name, const std::string& preset) {
  return {name,
          {"report", "sw"},
          {{kResults, results_file({quoted(preset) + ",ddp,1,1,1,COMPLETED,100,,", kSecondRow})}},
          {"sw/results.csv:2: preset", "is not a valid name", kNameFix}};
}
// A row whose field `column` (the rest fine) is `value`.
BadCase bad_number(const std::string& name, const std::string& row, const std::string& column,
                   const std::string& what) {
  return {name,
          {"report", "sw"},
          {{kResults, results_file({row, kSecondRow})}},
          {"sw/results.csv:2: " + column, what}};
}

}  // namespace

TEST_CASE("hostile names: strategy names from results.csv that would run, move or break",
          "[hostile][names]") {
  check_all({
      bad_strategy("backticks (ran in gnuplot)", "a`touch CANARY`b"),
      bad_strategy("shell command substitution", "$(touch CANARY)"),
      bad_strategy("gnuplot system()", "system('touch CANARY')"),
      bad_strategy("closing a single-quoted string", "x' . system('touch CANARY') . '"),
      bad_strategy("closing a double-quoted string", "x\" . system(\"touch CANARY\") . \""),
      bad_strategy("a newline ends the gnuplot command", "x\nsystem('touch CANARY')"),
      bad_strategy("a carriage return", "x\rsystem('touch CANARY')"),
      bad_strategy("gnuplot macro", "@cmd"),
      bad_strategy("../ (wrote outside the sweep folder)", "../escaped"),
      bad_strategy("/../../ after scaling-", "/../../../escaped"),
      bad_strategy("a slash", "a/b"),
      bad_strategy("an absolute path", "/etc/passwd"),
      bad_strategy("a NUL byte", std::string("ddp\0x", 5)),
      bad_strategy("a Markdown cell border", "a|b"),
      bad_strategy("HTML", "<script>alert(1)</script>"),
      bad_strategy("Markdown emphasis", "**bold**"),
      bad_strategy("a hidden file name", ".hidden"),
      bad_strategy("empty", ""),
      bad_strategy("200 characters", std::string(200, 'a')),
      bad_strategy("blanks", "two words"),
      bad_strategy("a tab", "a\tb"),
      bad_strategy("a backslash", "a\\b"),
      bad_strategy("non-ASCII", "\xc3\xa9t\xc3\xa9"),
      bad_strategy("a shell separator", "x;rm -rf y"),
  });
}

TEST_CASE("hostile names: preset names, numbers and structure in results.csv", "[hostile][names]") {
  const std::string kNumber = "is not a number";
  check_all({
      bad_preset("preset with backticks", "`touch CANARY`"),
      bad_preset("preset with ../", "../up"),
      bad_preset("preset with a blank (a new .dat column)", "a b"),
      bad_preset("empty preset", ""),
      bad_preset("preset with a newline (a new .dat line)", "1n1g\n9 9 9 9 9"),
      bad_number("tokens/s 1e400", "1n1g,ddp,1,1,1,COMPLETED,1e400,,", "tokens_per_s_mean",
                 kNumber),
      bad_number("tokens/s nan", "1n1g,ddp,1,1,1,COMPLETED,nan,,", "tokens_per_s_mean", kNumber),
      bad_number("tokens/s inf", "1n1g,ddp,1,1,1,COMPLETED,inf,,", "tokens_per_s_mean", kNumber),
      bad_number("tokens/s +5", "1n1g,ddp,1,1,1,COMPLETED,+5,,", "tokens_per_s_mean", kNumber),
      bad_number("tokens/s with a blank", "1n1g,ddp,1,1,1,COMPLETED, 5,,", "tokens_per_s_mean",
                 kNumber),
      bad_number("tokens/s in hex", "1n1g,ddp,1,1,1,COMPLETED,0x10,,", "tokens_per_s_mean",
                 kNumber),
      bad_number("gpus 1.5", "1n1g,ddp,1,1.5,1,COMPLETED,100,,", "gpus", "is not a count"),
      bad_number("gpus -2", "1n1g,ddp,1,-2,1,COMPLETED,100,,", "gpus", "is not a count"),
      bad_number("gpus 99999999999", "1n1g,ddp,1,99999999999,1,COMPLETED,100,,", "gpus",
                 "is not a count"),
      bad_number("gpus 0", "1n1g,ddp,1,0,1,COMPLETED,100,,", "gpus", "needs a positive GPU count"),
      bad_number("nodes two", "1n1g,ddp,two,1,1,COMPLETED,100,,", "nodes", kNumber),
      {"the line of a row after a quoted newline",
       {"report", "sw"},
       {{kResults,
         results_file({"1n1g,ddp,1,1,1,FAILED,,\"two\nlines\",", "1n2g,a/b,1,2,2,COMPLETED,1,,"})}},
       {"sw/results.csv:4: strategy", "\"a/b\""}},
      {"an unclosed quote",
       {"report", "sw"},
       {{kResults, results_file({"1n1g,\"ddp,1,1,1,COMPLETED,100,,"})}},
       {"sw/results.csv:2", "a quoted field is not closed", "add the closing quote"}},
      {"a quote inside an unquoted field",
       {"report", "sw"},
       {{kResults, results_file({"1n1g,dd\"p,1,1,1,COMPLETED,100,,"})}},
       {"sw/results.csv:2", "a quote inside an unquoted field"}},
      {"no strategy column",
       {"report", "sw"},
       {{kResults, "preset,gpus,state,tokens_per_s_mean\n1n1g,1,COMPLETED,1\n"}},
       {"sw/results.csv:1", "no column \"strategy\""}},
  });
}

TEST_CASE("hostile names: text columns are inert in summary.md, and gnuplot runs clean",
          "[hostile][names][gnuplot]") {
  if (find_program("gnuplot").empty())
    return hpc::test::missing_prerequisite("gnuplot is not installed (Debian: gnuplot-nox)");
  Sandbox sb;
  const std::string state = "FAILED`x` *b* _i_ [l](http://e) <b>&amp; $x$ ~~s~~ |c \\";
  const std::string message = "two\nlines | <img src=x onerror=alert(1)> `touch CANARY`";
  sb.write(kResults, results_file({"1n1g,a+b.c_d-e,1,1,7,COMPLETED,100,,",
                                   "1n2g,a+b.c_d-e,1,2,\"<i>8</i>|9\",COMPLETED,190,,",
                                   "1n4g,a+b.c_d-e,1,4,9," + quoted(state) + ",," +
                                       quoted(message) + ",runs/a_b/`x`.out"}));
  Run r = sb.hpclaunch({"report", "sw"});
  INFO(r.describe());
  CHECK(r.status == 0);  // gnuplot rendered both plots
  const std::string md = read_file(sb.work() / "sw/summary.md");
  // Every markup character escaped; the newline shown as \n; nothing left to interpret.
  CHECK_THAT(md, Contains("| 1n2g-a+b.c\\_d-e | a+b.c\\_d-e | 1 | 2 | 1/1 | 190.0 |"));
  CHECK_THAT(md, Contains("| \\<i\\>8\\</i\\>\\|9 |\n"));
  const std::string state_md =
      "FAILED\\`x\\` \\*b\\* \\_i\\_ \\[l\\](http\\://e) \\<b\\>\\&amp; \\$x\\$ \\~\\~s\\~\\~ \\|c "
      "\\\\";
  CHECK_THAT(md, Contains("| 1n4g-a+b.c\\_d-e | a+b.c\\_d-e | 1 | 4 | 0/1 | – |"));
  CHECK_THAT(md, Contains("- 1n4g-a+b.c\\_d-e: " + state_md +
                          " — two\\\\nlines \\| \\<img src=x onerror=alert(1)\\> \\`touch "
                          "CANARY\\` (log: runs/a\\_b/\\`x\\`.out)\n"));
  // gnuplot: the name is a single-quoted string (no `...` or @ expansion) and plain text.
  const std::string gp = read_file(sb.work() / "sw/plots/speedup.gp");
  CHECK_THAT(gp, Contains("'scaling-a+b.c_d-e.dat' using 1:2:7"));
  CHECK_THAT(gp, Contains("title 'a+b.c_d-e' noenhanced"));
  CHECK(fs::file_size(sb.work() / "sw/plots/speedup.png") > 0);
  CHECK(fs::file_size(sb.work() / "sw/plots/efficiency.svg") > 0);
  // Nothing ran: no CANARY anywhere in the sandbox.
  for (const auto& [path, kind] : sb.snapshot()) CHECK(path.find("CANARY") == std::string::npos);
  // Re-rendering by hand, as the script's header says, works too.
  Run again = spawn({find_program("gnuplot"), "speedup.gp"}, sb.work() / "sw/plots", sb.env());
  INFO(again.describe());
  CHECK(again.status == 0);
}
