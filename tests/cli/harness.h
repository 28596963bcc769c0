// What the command-line tests share: running a program (the launcher's run_command with exactly
// the environment given, no shell) and a throwaway directory per test that hpclaunch sees as its
// whole world (working dir, XDG_CONFIG_HOME, HPCLAUNCH_PATH, HOME), so the developer machine's
// configuration never leaks in.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace cli_test {

namespace fs = std::filesystem;

struct Run {
  int status = -1;  // exit status, or -1 when the program was killed by a signal
  int signal = 0;   // the signal that ended it
  bool timed_out = false;
  double seconds = 0;        // how long it ran
  double bound_seconds = 0;  // the bound it ran under (the timeout x HPC_TEST_SLOWDOWN)
  std::string out, err;      // everything it wrote to stdout and stderr

  // For failure messages: status and both streams.
  std::string describe() const;
};

// Runs argv[0] (an absolute path, or looked up in the PATH entry of `env`) with exactly the
// environment `env` ("NAME=value") in `cwd`; stdin is /dev/null. Kills the process group after
// `timeout` x HPC_TEST_SLOWDOWN. A bound against a hung program, never a timing: the default is
// far above what the slowest machine of the project's kind needs with the suite's parallel load
// (shellcheck over a hundred scripts took 30 s there; docs/hacking.md#time-bounds).
Run spawn(const std::vector<std::string>& argv, const fs::path& cwd,
          const std::vector<std::string>& env,
          std::chrono::milliseconds timeout = std::chrono::seconds(300));

// The built binary and the source tree (HPCLAUNCH_DATA_DIR: its presets/ and templates/).
std::string hpclaunch_binary();
fs::path source_dir();

// Finds `name` in /usr/local/bin, /usr/bin, /bin; empty when absent.
std::string find_program(const std::string& name);

std::string read_file(const fs::path& path);
void write_file(const fs::path& path, const std::string& content);  // creates parent dirs
std::vector<std::string> split_nul(const std::string& data);        // "a\0b\0" -> {a, b}
std::vector<std::string> split_lines(const std::string& text);      // without the '\n'

// A temp dir per test, removed with everything in it when the test ends:
//   root/work      the working directory hpclaunch runs in (./hpclaunch.json lives here)
//   root/xdg       XDG_CONFIG_HOME (its hpclaunch/ is the user dir)
//   root/hp1, hp2  HPCLAUNCH_PATH=root/hp1:root/hp2
//   root/home      HOME
class Sandbox {
 public:
  Sandbox();
  ~Sandbox();
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;

  const fs::path& root() const { return root_; }
  fs::path work() const { return root_ / "work"; }
  fs::path user_dir() const { return root_ / "xdg" / "hpclaunch"; }
  fs::path hp1() const { return root_ / "hp1"; }
  fs::path hp2() const { return root_ / "hp2"; }

  // Writes a file at a path relative to root() (or absolute).
  void write(const fs::path& path, const std::string& content) const;

  // The environment hpclaunch gets: a fixed PATH, HOME, XDG_CONFIG_HOME, HPCLAUNCH_PATH,
  // HPCLAUNCH_DATA_DIR (the source tree).
  std::vector<std::string> env() const;
  // Runs hpclaunch with these arguments (argv[0] is added) in work().
  Run hpclaunch(const std::vector<std::string>& args) const;

  // Every path under root() with its type (a link as "link:TARGET", not followed; fifo,
  // socket, char, block) and, for files, content: compare two snapshots to see that a command
  // wrote nothing.
  std::map<std::string, std::string> snapshot() const;

 private:
  fs::path root_;
};

}  // namespace cli_test
