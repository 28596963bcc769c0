// Job arrays, dependencies and mail: the grammar sbatch takes, and the one-line refusals.
#include "spec/job_features.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "error.h"

using Catch::Matchers::Contains;
using hpc::parse_array_indexes;
using hpc::UserError;

namespace {
std::vector<long> tasks(const std::string& text) {
  return parse_array_indexes(text, "--array").indexes;
}
}  // namespace

TEST_CASE("job arrays: ranges, steps, lists and the %LIMIT throttle", "[job-features]") {
  CHECK(tasks("0-3") == std::vector<long>{0, 1, 2, 3});
  CHECK(tasks("0-15:4") == std::vector<long>{0, 4, 8, 12});
  CHECK(tasks("1,3,5") == std::vector<long>{1, 3, 5});
  CHECK(tasks("0,6,16-18") == std::vector<long>{0, 6, 16, 17, 18});
  CHECK(tasks("7") == std::vector<long>{7});
  CHECK(tasks("3,1,3") == std::vector<long>{1, 3});  // sorted, each once (Slurm's bitmap)
  CHECK(tasks("4-4") == std::vector<long>{4});
  auto throttled = parse_array_indexes("0-9%2", "--array");
  CHECK(throttled.indexes.size() == 10);
  CHECK(throttled.limit == 2);
  CHECK(parse_array_indexes("0-9", "--array").limit == 0);
}

TEST_CASE("job arrays: what sbatch would refuse is refused in one line", "[job-features]") {
  struct Bad {
    std::string text, says;
  };
  const std::vector<Bad> bad = {
      {"1-", "has no last index"},
      {"5-3", "runs backwards (write 3-5)"},
      {"0-9%0", "the limit after '%'"},
      {"0-9%", "the limit after '%'"},
      {"0-9%x", "the limit after '%'"},
      {"", "an empty element"},
      {"1,,2", "an empty element"},
      {"1,", "an empty element"},
      {"-1", "\"\" is not an index"},
      {"a-b", "\"a\" is not an index"},
      {"0-15:0", "the step after ':'"},
      {"0-15:", "the step after ':'"},
      {"3:2", "a step (\":\") belongs to a range"},
      {"01", "\"01\" is not an index"},
      {"+1", "\"+1\" is not an index"},
      {"4000001", "is not an index"},
      {"0-99999", "more than 10000 tasks"},
      {"$(touch x)", "is not an index"},
  };
  for (const auto& b : bad) {
    INFO(b.text);
    try {
      parse_array_indexes(b.text, "--array");
      FAIL("accepted");
    } catch (const UserError& e) {
      const std::string what = e.what();
      CHECK_THAT(what, Contains("--array: ") && Contains(b.says) && Contains("; "));
      CHECK(what.find('\n') == std::string::npos);
    }
  }
}

TEST_CASE("dependencies: JOBID[:TYPE], afterok by default, grouped by type", "[job-features]") {
  auto d = hpc::parse_dependency("123", "--after");
  CHECK(d.job_id == "123");
  CHECK(d.type == "afterok");
  CHECK(hpc::parse_dependency("123:afterany", "--after").type == "afterany");
  CHECK(hpc::parse_dependency("123_4:afternotok", "--after").job_id == "123_4");
  CHECK(hpc::dependency_directive({{"12", "afterok"}, {"14", "afterany"}, {"13", "afterok"}}) ==
        "afterok:12:13,afterany:14");
  CHECK(hpc::dependency_directive({{"7", "after"}}) == "after:7");

  const std::vector<std::pair<std::string, std::string>> bad = {
      {"0", "\"0\" is not a job id"},
      {"-1", "\"-1\" is not a job id"},
      {"", "\"\" is not a job id"},
      {"12+1", "\"12+1\" is not a job id"},
      {"afterok:12", "\"afterok\" is not a job id"},
      {"12:afterOK", "unknown dependency type \"afterOK\""},
      {"12:aftercorr", "unknown dependency type"},
      {"12:", "unknown dependency type \"\""},
      {"$(touch x)", "is not a job id"},
  };
  for (const auto& [text, says] : bad) {
    INFO(text);
    try {
      hpc::parse_dependency(text, "--after");
      FAIL("accepted");
    } catch (const UserError& e) {
      CHECK_THAT(std::string(e.what()), Contains("--after: ") && Contains(says));
    }
  }
}

TEST_CASE("mail: Slurm's mail types and an address", "[job-features]") {
  CHECK(hpc::parse_mail_type("end", "--mail-type") == "END");
  CHECK(hpc::parse_mail_type("TIME_LIMIT_80", "--mail-type") == "TIME_LIMIT_80");
  CHECK(hpc::known_mail_types().size() == 13);
  CHECK_THROWS_WITH(hpc::parse_mail_type("ENDS", "--mail-type"),
                    Contains("unknown mail type \"ENDS\"") && Contains("did you mean \"END\""));
  CHECK_NOTHROW(hpc::check_mail_user("ada.lovelace+hpc@uni-x.example.org", "--mail-user"));
  for (const std::string bad : {"ada", "$(touch x)@x.org", "a@b c", "a@", "@b.org", "a\"@b.org"}) {
    INFO(bad);
    CHECK_THROWS_WITH(hpc::check_mail_user(bad, "--mail-user"), Contains("is not a mail address"));
  }
}
