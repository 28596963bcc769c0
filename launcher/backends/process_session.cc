#include "backends/process_session.h"

#include <dirent.h>
#include <signal.h>

#include <cctype>
#include <cstdlib>
#include <sstream>
#include <string>

#include "posix_io.h"

namespace hpc {

std::vector<pid_t> session_members(pid_t sid, bool with_zombies) {
  std::vector<pid_t> out;
  if (sid <= 0) return out;
  DIR* dir = opendir("/proc");
  if (!dir) return out;
  while (dirent* entry = readdir(dir)) {
    if (!std::isdigit(static_cast<unsigned char>(entry->d_name[0]))) continue;
    std::string stat = read_small_file(std::string("/proc/") + entry->d_name + "/stat");
    size_t paren = stat.rfind(')');
    if (paren == std::string::npos || paren + 2 >= stat.size()) continue;
    std::istringstream fields(stat.substr(paren + 2));
    char state = 0;
    long ppid = 0, pgrp = 0, session = 0;
    if (!(fields >> state >> ppid >> pgrp >> session)) continue;
    bool dead = state == 'Z' || state == 'X';
    if (session == sid && (with_zombies || !dead)) out.push_back(std::atoi(entry->d_name));
  }
  closedir(dir);
  return out;
}

std::vector<pid_t> processes_in_session(pid_t sid) { return session_members(sid, false); }

void signal_session(pid_t sid, int sig, pid_t except) {
  if (sid <= 0) return;
  if (except == 0) kill(-sid, sig);  // the batch shell's own group first: bash and srun
  for (pid_t p : processes_in_session(sid)) {
    if (p == except) continue;
    if (sig == SIGTERM) kill(p, SIGCONT);
    kill(p, sig);
  }
}

}  // namespace hpc
