#include "render/script_diff.h"

#include <catch2/catch.hpp>

#include "render/builtin_testing.h"
#include "render/render.h"

namespace {

std::string render(const std::string& preset, std::vector<std::string> sets = {}) {
  hpc::SpecRequest r = hpc::testing::builtin_request(preset, "generic", std::move(sets));
  r.strategy = "ddp";
  return hpc::testing::render_builtin(hpc::testing::resolve_builtin(r));
}

}  // namespace

TEST_CASE("script diff: two jobs differ only in their job part", "[render][diff]") {
  const std::string a = render("1n2g"), b = render("2n4g");
  CHECK(hpc::same_job_library(a, b));
  const std::string d = hpc::job_diff(a, "a.sbatch", b, "b.sbatch");
  CHECK(d.rfind("--- a.sbatch\n+++ b.sbatch\n@@ -", 0) == 0);
  CHECK(d.find("\n-#SBATCH --nodes=1\n-#SBATCH --ntasks-per-node=2\n") != std::string::npos);
  CHECK(d.find("\n+#SBATCH --nodes=2\n+#SBATCH --ntasks-per-node=4\n") != std::string::npos);
  CHECK(d.find("hpc_json_string") == std::string::npos);  // nothing of the library
  // Every line of a hunk is context, a removal or an addition.
  size_t start = d.find("@@");
  for (size_t at = start; at < d.size(); at = d.find('\n', at) + 1) {
    char c = d[at];
    CHECK((c == ' ' || c == '-' || c == '+' || c == '@'));
  }
  CHECK(hpc::job_diff(a, "a", a, "a").empty());
}

TEST_CASE("script diff: hunks count their lines as patch reads them", "[render][diff]") {
  const std::string a = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n16\n";
  const std::string b = "1\n2\nthree\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n16\n17\n";
  CHECK(hpc::job_diff(a, "a", b, "b") ==
        "--- a\n+++ b\n"
        "@@ -1,6 +1,6 @@\n 1\n 2\n-3\n+three\n 4\n 5\n 6\n"
        "@@ -12,5 +12,5 @@\n 12\n 13\n 14\n-15\n 16\n+17\n");
  CHECK_FALSE(hpc::same_job_library(a + std::string(hpc::kJobLibraryMarker) + "\nx\n",
                                    a + std::string(hpc::kJobLibraryMarker) + "\ny\n"));
}
