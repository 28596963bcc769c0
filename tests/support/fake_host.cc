#include "support/fake_host.h"

#include <algorithm>
#include <utility>

namespace hpc::test {

CommandResult exited(int code, const std::string& out, const std::string& err) {
  CommandResult r;
  r.exit_code = code;
  r.out = out;
  r.err = err;
  return r;
}

CommandResult succeeded(const std::string& out) { return exited(0, out); }

CommandResult failed(const std::string& err, int code) { return exited(code, "", err); }

CommandResult timed_out() {
  CommandResult r;
  r.timed_out = true;
  r.term_signal = 9;
  return r;
}

FakeHost::FakeHost(std::string name, std::string home)
    : name_(std::move(name)), home_(std::move(home)) {
  dirs_.insert("/");
}

FakeHost& FakeHost::reply(const std::string& program, CommandResult result) {
  return reply(program, [result](const Call&) { return result; });
}

FakeHost& FakeHost::reply(const std::string& program, Answer answer) {
  scripts_[program].next.push_back(std::move(answer));
  return *this;
}

FakeHost& FakeHost::reply_always(const std::string& program, CommandResult result) {
  return reply_always(program, [result](const Call&) { return result; });
}

FakeHost& FakeHost::reply_always(const std::string& program, Answer answer) {
  scripts_[program].always = std::move(answer);
  return *this;
}

std::vector<FakeHost::Call> FakeHost::calls_of(const std::string& program) const {
  std::vector<Call> out;
  std::copy_if(calls_.begin(), calls_.end(), std::back_inserter(out),
               [&](const Call& c) { return !c.argv.empty() && c.argv[0] == program; });
  return out;
}

std::string FakeHost::programs_run() const {
  std::string out;
  for (const auto& c : calls_) out += (out.empty() ? "" : " ") + c.argv.at(0);
  return out;
}

CommandResult FakeHost::run(const std::vector<std::string>& argv, const CommandOptions& options) {
  calls_.push_back({argv, options});
  const Call& call = calls_.back();
  auto it = argv.empty() ? scripts_.end() : scripts_.find(argv[0]);
  if (it != scripts_.end() && !it->second.next.empty()) {
    Answer answer = std::move(it->second.next.front());
    it->second.next.pop_front();
    return answer(call);
  }
  if (it != scripts_.end() && it->second.always) return it->second.always(call);
  CommandResult missing;
  missing.spawn_error = (argv.empty() ? std::string("(no program)") : argv[0]) + ": not found";
  return missing;
}

void FakeHost::make_dirs(const std::string& path) {
  if (!file_error_.empty()) throw BackendError(file_error_);
  // mkdir -p: every parent too.
  for (size_t slash = path.find('/', 1); slash != std::string::npos;
       slash = path.find('/', slash + 1))
    dirs_.insert(path.substr(0, slash));
  dirs_.insert(path);
}

void FakeHost::write_file(const std::string& path, const std::string& content, int mode) {
  if (!file_error_.empty()) throw BackendError(file_error_);
  const std::string parent = path.substr(0, std::max<size_t>(path.rfind('/'), 1));
  if (!dirs_.count(parent)) throw BackendError(path + ": no such directory " + parent);
  files_[path] = {content, mode};
}

LogChunk FakeHost::read_file(const std::string& path, uint64_t offset, size_t max_bytes) {
  LogChunk chunk;
  auto it = files_.find(path);
  if (it == files_.end()) return chunk;
  const std::string& data = it->second.content;
  chunk.exists = true;
  if (offset < data.size()) chunk.data = data.substr(offset, max_bytes);
  chunk.next_offset = offset + chunk.data.size();
  return chunk;
}

std::string FakeHost::absolute(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  if (path == "~") return home_;
  if (path.rfind("~/", 0) == 0) return home_ + path.substr(1);
  return home_ + "/" + path;
}

}  // namespace hpc::test
