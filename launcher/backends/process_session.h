// A local job is one session: the batch shell starts it (setsid) and every process of the job
// inherits its id, as Slurm puts a job's processes in one cgroup. Cancel and the time limit
// find the job's processes by that id in /proc.
#pragma once

#include <sys/types.h>

#include <vector>

namespace hpc {

// The processes whose session id is `sid`, zombies too when asked.
std::vector<pid_t> session_members(pid_t sid, bool with_zombies);

// The live (non-zombie) processes whose session id is `sid`.
std::vector<pid_t> processes_in_session(pid_t sid);

// Sends `sig` to every process of the session `sid` but `except` (0: none excepted); SIGTERM
// comes with a SIGCONT, so that a stopped process wakes to see it.
void signal_session(pid_t sid, int sig, pid_t except = 0);

}  // namespace hpc
