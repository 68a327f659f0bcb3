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

// How long a Request destroyed unwaited may still wait. Normally the whole
// timeout; once any wait of this process has failed (poll_until threw), the
// process is on its way to abort(), and every unwaited request shares one
// deadline, kAbortGrace after that first failure: waiting a full timeout for
// each outstanding request made a hung peer end the job only after 2-4 x timeout.
inline constexpr std::chrono::milliseconds kAbortGrace{2000};
std::chrono::milliseconds unwaited_request_budget(std::chrono::milliseconds timeout);

}  // namespace strata::rt
