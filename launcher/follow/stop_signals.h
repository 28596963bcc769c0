// SIGINT, SIGTERM and SIGHUP caught for the length of a wait that hpclaunch runs (a follow, the
// requeue doctor): the handler notes the signal, the waiting loop asks for it between naps and
// decides (detach, cancel, stop). The previous handlers come back when the scope ends.
#pragma once

#include <signal.h>

#include <array>
#include <chrono>

namespace hpc {

class StopSignals {
 public:
  StopSignals();   // installs the handlers; no signal noted yet
  ~StopSignals();  // the previous handlers again
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The last signal caught since the start or clear(): SIGINT (Ctrl-C), SIGTERM (`timeout`,
  // kill), SIGHUP (the terminal closed); 0 = none.
  static int caught();
  static void clear();

 private:
  std::array<struct sigaction, 3> old_{};  // SIGINT, SIGTERM, SIGHUP
};

// Sleeps `d` in slices of at most 50 ms; returns early once a stop signal was caught.
void nap_unless_stopped(std::chrono::milliseconds d);

}  // namespace hpc
