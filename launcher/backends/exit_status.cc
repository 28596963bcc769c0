#include "backends/exit_status.h"

#include <algorithm>

namespace hpc {

int exit_status_for(const JobStatus& s) {
  const std::string& st = s.state;
  if (st == "COMPLETED") return follow_exit::kCompleted;
  if (st == "FAILED" || st == "SPECIAL_EXIT")
    return s.exit_code > 0 ? std::min(s.exit_code, 255)
                           : (s.exit_signal > 0 ? 128 + s.exit_signal : 1);
  if (st == "TIMEOUT") return follow_exit::kTimeout;
  if (st == "CANCELLED") return follow_exit::kCancelled;
  if (st == "NODE_FAIL" || st == "BOOT_FAIL") return follow_exit::kNodeFail;
  if (st == "PREEMPTED" || st == "DEADLINE") return follow_exit::kPreempted;
  if (st == "OUT_OF_MEMORY") return follow_exit::kOutOfMemory;
  return 1;
}

}  // namespace hpc
