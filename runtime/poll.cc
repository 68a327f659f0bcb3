#include "runtime/poll.h"

#include <thread>

#include <fmt/format.h>

#include "runtime/communicator.h"

namespace strata::rt {

void poll_until(const std::function<bool()>& done, std::chrono::milliseconds timeout,
                const std::function<std::string()>& describe) {
  using Clock = std::chrono::steady_clock;
  constexpr auto kSpin = std::chrono::microseconds(50);
  constexpr auto kYield = std::chrono::milliseconds(10);
  constexpr auto kSleep = std::chrono::microseconds(50);
  const auto start = Clock::now();
  while (!done()) {
    const auto waited = Clock::now() - start;
    if (waited > timeout) {
      throw CommError(fmt::format(
          "{} did not complete within {:.1f} s (a peer rank is hung, dead or not calling the "
          "same operation)",
          describe(), std::chrono::duration<double>(waited).count()));
    }
    if (waited > kYield) {
      std::this_thread::sleep_for(kSleep);
    } else if (waited > kSpin) {
      std::this_thread::yield();
    }
  }
}

}  // namespace strata::rt
