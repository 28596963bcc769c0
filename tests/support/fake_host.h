// A Host for unit tests of SlurmBackend: no processes and no disk. Every run() is recorded
// (argv and options) and answered from a script kept per program (argv[0]): the answers given
// with reply() in order, then the one given with reply_always(). A program with nothing
// (left) to answer is not installed on this host (spawn_error), as sacct is on many clusters.
// Files and directories live in memory; write_file into a directory never made fails, as it
// does on a real host.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "backends/host.h"

namespace hpc::test {

// What a program gives back, as run_command would report it.
CommandResult exited(int code, const std::string& out, const std::string& err = "");
CommandResult succeeded(const std::string& out);             // exit 0
CommandResult failed(const std::string& err, int code = 1);  // stderr, exit 1
CommandResult timed_out();                                   // killed at the timeout

class FakeHost : public Host {
 public:
  struct Call {
    std::vector<std::string> argv;
    CommandOptions options;
  };
  // An answer may depend on the call (say, echo the tag that sbatch was given).
  using Answer = std::function<CommandResult(const Call&)>;
  struct File {
    std::string content;
    int mode = 0;
  };

  // `home` is where "~" and relative paths lead (absolute()).
  explicit FakeHost(std::string name = "fakehost", std::string home = "/home/user");

  // The next answer of `program`, after those given before.
  FakeHost& reply(const std::string& program, CommandResult result);
  FakeHost& reply(const std::string& program, Answer answer);
  // The answer of `program` once its queue is used up.
  FakeHost& reply_always(const std::string& program, CommandResult result);
  FakeHost& reply_always(const std::string& program, Answer answer);
  // From now on make_dirs and write_file throw BackendError(why): a full disk, a lost login node.
  void fail_file_calls(const std::string& why) { file_error_ = why; }

  // Every run() in order; those of one program.
  const std::vector<Call>& calls() const { return calls_; }
  std::vector<Call> calls_of(const std::string& program) const;
  // argv[0] of every run() in order: "sbatch squeue sbatch scontrol" reads as the story.
  std::string programs_run() const;
  const std::map<std::string, File>& files() const { return files_; }
  const std::set<std::string>& dirs() const { return dirs_; }

  // The Host: commands answered from the script, paths under `home`, files in memory.
  std::string name() const override { return name_; }
  CommandResult run(const std::vector<std::string>& argv,
                    const CommandOptions& options = {}) override;
  std::string absolute(const std::string& path) override;
  void make_dirs(const std::string& path) override;
  void write_file(const std::string& path, const std::string& content, int mode) override;
  LogChunk read_file(const std::string& path, uint64_t offset, size_t max_bytes) override;

 private:
  struct Script {
    std::deque<Answer> next;
    Answer always;
  };
  std::string name_, home_;
  std::map<std::string, Script> scripts_;
  std::vector<Call> calls_;
  std::map<std::string, File> files_;
  std::set<std::string> dirs_;
  std::string file_error_;
};

}  // namespace hpc::test
