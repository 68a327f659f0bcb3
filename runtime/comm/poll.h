// Waiting without waiting forever: the one polling loop every communicator
// uses, so a hung peer becomes a CommError after the timeout instead of a hang.
#pragma once

#include <chrono>
#include <functional>
#include <string>

namespace strata::rt {

// Calls done() until it returns true. Spins for the first ~50 us (collective
// latencies are microseconds), then yields the core on every poll (ranks may
// outnumber cores), then after 10 ms, when this node's ranks outnumber its
// cores, also sleeps 50 us between polls. Throws
// CommError with describe() + the time waited once timeout has passed.
void poll_until(const std::function<bool()>& done, std::chrono::milliseconds timeout,
                const std::function<std::string()>& describe);

}  // namespace strata::rt
