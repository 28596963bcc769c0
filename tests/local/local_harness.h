// What the local backend's tests share: a throwaway directory per test, the built hpclaunch,
// a probe "trainer" that prints its rank variables, and waiting for a job to end.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/local_backend.h"
#include "subprocess.h"

namespace local_test {

namespace fs = std::filesystem;

std::string hpclaunch_binary();

std::string read_file(const fs::path& path);
void write_file(const fs::path& path, const std::string& content,
                fs::perms mode = fs::perms::owner_all);
std::vector<std::string> lines_of(const std::string& text);
// Lines of `text` that contain `needle`.
std::vector<std::string> lines_with(const std::string& text, const std::string& needle);

// A temp dir removed with everything in it when the test ends:
//   root/work  the job's working directory     root/runs  the runs root
//   root/xdg   XDG_CONFIG_HOME                  root/hp    HPCLAUNCH_PATH
//   root/probe the probe trainer (see probe_script in local_harness.cc for its --mode words)
class Sandbox {
 public:
  Sandbox();
  ~Sandbox();
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;

  const fs::path& root() const { return root_; }
  fs::path work() const { return root_ / "work"; }
  fs::path runs() const { return root_ / "runs"; }
  fs::path probe() const { return root_ / "probe"; }

  // Runs hpclaunch (no shell) with this sandbox's environment.
  hpc::CommandResult hpclaunch(const std::vector<std::string>& args) const;
  // `hpclaunch render --no-project --cluster generic --strategy ddp --preset PRESET
  //  --set trainer.program=<probe> SETS... -- --mode MODE`; REQUIREs that it worked.
  std::string render(const std::string& preset, const std::string& mode,
                     const std::vector<std::string>& sets = {}) const;

  hpc::LocalBackend backend(
      hpc::LocalBackendOptions options = {}) const;  // hpclaunch as executable
  hpc::SubmitRequest request(const std::string& script) const;

 private:
  fs::path root_;
};

// Polls status until the job is in a final state or `timeout` passes; returns the last status.
hpc::JobStatus wait_for_end(hpc::Backend& backend, const std::string& job_id,
                            std::chrono::milliseconds timeout = std::chrono::seconds(30));
// Polls until `path` contains `needle` `count` times; false after `timeout`.
bool wait_for_text(const fs::path& path, const std::string& needle, int count,
                   std::chrono::milliseconds timeout = std::chrono::seconds(20));

bool is_final(const std::string& state);

}  // namespace local_test
