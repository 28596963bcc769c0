// Repeats of a point: mean, the 95% Student-t interval, min-max, the disagreement flag, and
// speedup per series against the mean of its smallest point.
#include <catch2/catch.hpp>

#include <cmath>

#include "campaigns/plot.h"
#include "campaigns/repeat_stats.h"

using namespace hpc;

namespace {
ResultRow run(const std::string& point, const std::string& series, int gpus, int repeat,
              std::optional<double> tps) {
  ResultRow r;
  r.preset = gpus == 1 ? "1n1g" : "1n2g";
  r.strategy = "ddp";
  r.point = point;
  r.series = series;
  r.gpus = gpus;
  r.nodes = 1;
  r.repeat = repeat;
  r.state = tps ? "COMPLETED" : "FAILED";
  r.tokens_per_s = tps;
  return r;
}
}  // namespace

TEST_CASE("Student t critical values", "[sweep][stats]") {
  CHECK(t_critical_95(1) == Approx(12.706));
  CHECK(t_critical_95(2) == Approx(4.303));
  CHECK(t_critical_95(30) == Approx(2.042));
  CHECK(t_critical_95(1000) == Approx(1.960));
  CHECK(std::isnan(t_critical_95(0)));
}

TEST_CASE("repeats give mean, a 95% t-interval, min-max and speedup per series", "[sweep][stats]") {
  std::vector<ResultRow> rows = {
      run("a1", "ddp", 1, 1, 100), run("a2", "ddp", 2, 1, 180),
      run("a1", "ddp", 1, 2, 102), run("a2", "ddp", 2, 2, 190),
      run("a1", "ddp", 1, 3, 98),  run("a2", "ddp", 2, 3, std::nullopt),
  };
  auto stats = summarise_points(rows);
  REQUIRE(stats.size() == 2);
  const PointStats& a1 = stats[0];
  CHECK(a1.runs == 3);
  CHECK(a1.measured == 3);
  CHECK(*a1.mean == Approx(100));
  // sample std 2, n 3: 4.303 * 2 / sqrt(3)
  CHECK(*a1.ci95 == Approx(4.303 * 2 / std::sqrt(3.0)));
  CHECK(*a1.min == 98);
  CHECK(*a1.max == 102);
  CHECK_FALSE(a1.disagree);
  CHECK(*a1.speedup == Approx(1.0));
  const PointStats& a2 = stats[1];
  CHECK(a2.measured == 2);
  CHECK(*a2.mean == Approx(185));
  CHECK(*a2.speedup == Approx(1.85));
  CHECK(*a2.efficiency == Approx(0.925));
  CHECK(*a2.speedup_ci95 == Approx(*a2.ci95 / 100));
  REQUIRE(a2.problems.size() == 1);
  CHECK(a2.problems[0].repeat == 3);
  CHECK(a2.problems[0].state == "FAILED");
}

TEST_CASE("repeats that differ by more than 10% of their mean are flagged", "[sweep][stats]") {
  auto stats = summarise_points({run("p", "s", 1, 1, 100), run("p", "s", 1, 2, 112)});
  CHECK(stats[0].disagree);  // 12 / 106 > 10%
  stats = summarise_points({run("p", "s", 1, 1, 100), run("p", "s", 1, 2, 109)});
  CHECK_FALSE(stats[0].disagree);
  stats = summarise_points({run("p", "s", 1, 1, 100)});
  CHECK_FALSE(stats[0].ci95);  // one repeat: no interval, no flag
  CHECK_FALSE(stats[0].disagree);
  std::string md = summary_markdown(
      summarise_points({run("p", "s", 1, 1, 100), run("p", "s", 1, 2, 130)}), "t", false);
  CHECK(md.find("95% Student-t interval") != std::string::npos);
  CHECK(md.find("repeats disagree") != std::string::npos);
}

TEST_CASE("series are compared separately", "[sweep][stats]") {
  auto stats = summarise_points({run("x1", "x", 1, 1, 100), run("x2", "x", 2, 1, 150),
                                 run("y1", "y", 1, 1, 50), run("y2", "y", 2, 1, 100)});
  CHECK(*stats[1].speedup == Approx(1.5));
  CHECK(*stats[3].speedup == Approx(2.0));
  CHECK(*stats[3].efficiency == Approx(1.0));
}

TEST_CASE("summary.md text: markup and bare links stay text", "[summary]") {
  CHECK(markdown_text("see https://evil.example/x") == "see https\\://evil.example/x");
  CHECK(markdown_text("www.evil.example and WWW.x.org") == "www\\.evil.example and WWW\\.x.org");
  CHECK(markdown_text("mail ada@example.org") == "mail ada\\@example.org");
  CHECK(markdown_text("awww.x") == "awww.x");  // not a word starting with www.
  CHECK(markdown_text("[l](u) *b* <i>") == "\\[l\\](u) \\*b\\* \\<i\\>");
  CHECK(markdown_text("a\nb") == "a\\\\nb");  // the newline shown as \n, its backslash escaped
}
