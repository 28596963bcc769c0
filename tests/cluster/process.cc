#include "process.h"

namespace hpc::test {

std::string ProcessResult::summary() const {
  std::string s = "`" + command + "`";
  if (!spawn_error.empty()) return s + " could not start: " + spawn_error;
  if (timed_out) s += " timed out";
  if (term_signal != 0) s += " killed by signal " + std::to_string(term_signal);
  if (exit_code >= 0) s += " exited " + std::to_string(exit_code);
  std::string e = err.substr(0, 400);
  for (char& c : e) {
    if (c == '\n') c = ' ';
  }
  if (!e.empty()) s += "; stderr: " + e;
  return s;
}

ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options) {
  ProcessResult result;
  static_cast<hpc::CommandResult&>(result) = hpc::run_command(argv, options);
  for (const auto& a : argv) result.command += (result.command.empty() ? "" : " ") + a;
  return result;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace hpc::test
