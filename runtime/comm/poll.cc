#include "runtime/comm/poll.h"

#include <thread>

#include <fmt/format.h>

#include "runtime/comm/communicator.h"
#include "runtime/launch/mpi_env.h"

namespace strata::rt {

namespace {

// More processes on this node than cores they may use: a waiting rank must give
// its core away, or the rank it waits for cannot run.
bool node_oversubscribed() {
  static const bool oversubscribed = detect_launch().local_size > cores_available();
  return oversubscribed;
}

}  // namespace

void poll_until(const std::function<bool()>& done, std::chrono::milliseconds timeout,
                const std::function<std::string()>& describe) {
  using Clock = std::chrono::steady_clock;
  constexpr auto kSpin = std::chrono::microseconds(50);
  constexpr auto kYield = std::chrono::milliseconds(10);
  constexpr auto kSleep = std::chrono::microseconds(50);
  // Sleeping between polls only when ranks outnumber cores: a rank that sleeps
  // also slows the transfer it waits for once its peer arrives (MPI moves a large
  // non-blocking collective one fragment per poll): in this project's `dp 2, m 2`
  // runs on 2 cores a 13.7 MB gradient all-reduce took 31 ms instead of 3 ms
  // after its peer came 15 ms late (measured-trace.json, 2026-11-29).
  const bool may_sleep = node_oversubscribed();
  const auto start = Clock::now();
  while (!done()) {
    const auto waited = Clock::now() - start;
    if (waited > timeout) {
      throw CommError(fmt::format(
          "{} did not complete within {:.1f} s (a peer rank is hung, dead or not calling the "
          "same operation)",
          describe(), std::chrono::duration<double>(waited).count()));
    }
    if (may_sleep && waited > kYield) {
      std::this_thread::sleep_for(kSleep);
    } else if (waited > kSpin) {
      std::this_thread::yield();
    }
  }
}

}  // namespace strata::rt
