#include "follow/stop_signals.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <thread>

namespace hpc {
namespace {

std::atomic<int> g_caught{0};
extern "C" void on_stop_signal(int sig) { g_caught = sig; }
constexpr std::array<int, 3> kSignals{SIGINT, SIGTERM, SIGHUP};

}  // namespace

StopSignals::StopSignals() {
  g_caught = 0;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &sa, &old_[i]);
}

StopSignals::~StopSignals() {
  for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &old_[i], nullptr);
}

int StopSignals::caught() { return g_caught; }
void StopSignals::clear() { g_caught = 0; }

void nap_unless_stopped(std::chrono::milliseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (g_caught == 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(
        std::min<std::chrono::milliseconds>(d, std::chrono::milliseconds(50)));
}

}  // namespace hpc
