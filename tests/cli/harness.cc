#include "harness.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "subprocess.h"
#include "support/time_bounds.h"

#ifndef HPCLAUNCH_BIN
#error "HPCLAUNCH_BIN must name the built hpclaunch binary"
#endif
#ifndef HPC_TEST_SOURCE_DIR
#error "HPC_TEST_SOURCE_DIR must name the source tree"
#endif

namespace cli_test {

std::string Run::describe() const {
  std::ostringstream s;
  s << "exit status " << status;
  if (signal) s << ", signal " << signal;
  if (timed_out)
    s << ", timed out: killed at the test's bound of " << bound_seconds << " s (" << seconds
      << " s taken; a slower machine: raise HPC_TEST_SLOWDOWN, docs/hacking.md#time-bounds)";
  else
    s << ", " << seconds << " s";
  s << "\n--- stdout ---\n" << out << "\n--- stderr ---\n" << err;
  return s.str();
}

Run spawn(const std::vector<std::string>& argv, const fs::path& cwd,
          const std::vector<std::string>& env, std::chrono::milliseconds timeout) {
  if (argv.empty()) throw std::invalid_argument("spawn: empty argv");
  hpc::CommandOptions options;  // argv[0] is looked up in the PATH of `env`
  options.env = env;
  options.env_only = true;
  options.cwd = cwd.string();
  options.timeout = hpc::test::scaled(timeout);
  const auto began = std::chrono::steady_clock::now();
  hpc::CommandResult r = hpc::run_command(argv, options);
  Run run;
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  run.bound_seconds = std::chrono::duration<double>(options.timeout).count();
  run.status = r.exit_code;
  run.signal = r.term_signal;
  run.timed_out = r.timed_out;
  run.out = std::move(r.out);
  run.err = std::move(r.err);
  if (!r.spawn_error.empty()) {  // as a shell would say it
    run.status = 127;
    run.err += "spawn: " + argv.front() + ": " + r.spawn_error + "\n";
  }
  return run;
}

std::string hpclaunch_binary() { return HPCLAUNCH_BIN; }
fs::path source_dir() { return HPC_TEST_SOURCE_DIR; }

std::string find_program(const std::string& name) {
  for (const char* dir : {"/usr/local/bin", "/usr/bin", "/bin"}) {
    std::string p = std::string(dir) + "/" + name;
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

void write_file(const fs::path& path, const std::string& content) {
  if (path.has_parent_path()) fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

std::vector<std::string> split_nul(const std::string& data) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < data.size()) {
    size_t nul = data.find('\0', start);
    if (nul == std::string::npos) nul = data.size();
    out.push_back(data.substr(start, nul - start));
    start = nul + 1;
  }
  return out;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

Sandbox::Sandbox() {
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/hpclaunch-cli-XXXXXX";
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  root_ = tmpl;
  for (const char* d : {"work", "xdg/hpclaunch", "hp1", "hp2", "home"})
    fs::create_directories(root_ / d);
}

Sandbox::~Sandbox() {
  std::error_code ec;
  if (!std::getenv("HPC_TEST_KEEP_TMP")) fs::remove_all(root_, ec);
}

void Sandbox::write(const fs::path& path, const std::string& content) const {
  write_file(path.is_absolute() ? path : root_ / path, content);
}

std::vector<std::string> Sandbox::env() const {
  return {"PATH=/usr/local/bin:/usr/bin:/bin",
          "HOME=" + (root_ / "home").string(),
          "XDG_CONFIG_HOME=" + (root_ / "xdg").string(),
          "HPCLAUNCH_PATH=" + hp1().string() + ":" + hp2().string(),
          "HPCLAUNCH_DATA_DIR=" + source_dir().string(),
          "LC_ALL=C.UTF-8"};
}

Run Sandbox::hpclaunch(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {hpclaunch_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  return spawn(argv, work(), env());
}

std::map<std::string, std::string> Sandbox::snapshot() const {
  std::map<std::string, std::string> out;
  for (auto it = fs::recursive_directory_iterator(root_); it != fs::recursive_directory_iterator();
       ++it) {
    std::string rel = it->path().lexically_relative(root_).string();  // links not resolved
    // The entry itself, a link not followed: a link replaced by a file is a change.
    const fs::file_status st = it->symlink_status();
    if (fs::is_symlink(st))
      out[rel] = "link:" + fs::read_symlink(it->path()).string();
    else if (fs::is_directory(st))
      out[rel] = "dir";
    else if (fs::is_regular_file(st))
      out[rel] = "file:" + read_file(it->path());
    else if (fs::is_fifo(st))
      out[rel] = "fifo";
    else if (fs::is_socket(st))
      out[rel] = "socket";
    else if (fs::is_character_file(st))
      out[rel] = "char";
    else if (fs::is_block_file(st))
      out[rel] = "block";
    else
      out[rel] = "other";
  }
  return out;
}

}  // namespace cli_test
