#include "runtime/comm/poll.h"

#include <algorithm>
#include <atomic>
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

using Clock = std::chrono::steady_clock;

// When the first wait of this process failed (0: none has). Clock ticks since
// its epoch, atomic: a process that drives several GPUs waits from several threads.
std::atomic<Clock::rep>& first_failure() {
  static std::atomic<Clock::rep> at{0};
  return at;
}

void note_failure() {
  Clock::rep expected = 0;
  first_failure().compare_exchange_strong(expected, std::max<Clock::rep>(1, Clock::now().time_since_epoch().count()));
}

}  // namespace

std::chrono::milliseconds unwaited_request_budget(std::chrono::milliseconds timeout) {
  const Clock::rep failed_at = first_failure().load();
  if (failed_at == 0) return timeout;
  const Clock::time_point deadline = Clock::time_point(Clock::duration(failed_at)) + kAbortGrace;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return std::clamp(left, std::chrono::milliseconds(0), timeout);
}

void poll_until(const std::function<bool()>& done, std::chrono::milliseconds timeout,
                const std::function<std::string()>& describe) {
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
  auto finished = [&done] {
    try {
      return done();
    } catch (const CommError&) {
      note_failure();  // a peer failed: the process is on its way out
      throw;
    }
  };
  while (!finished()) {
    const auto waited = Clock::now() - start;
    if (waited > timeout) {
      note_failure();
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
