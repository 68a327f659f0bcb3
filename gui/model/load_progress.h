// Progress and cancellation of long GUI work (reading a big trace, a simulation,
// a sweep). The same shape as the simulator's and the sweep's callbacks, so one
// worker drives them all.
#pragma once

#include <functional>
#include <stdexcept>

namespace strata::gui {

// Called with the fraction done, in [0, 1], from the thread doing the work.
// Returning false asks the work to stop; it then throws Cancelled.
using ProgressFn = std::function<bool(double fraction)>;

// Thrown by work that stopped because its ProgressFn returned false.
class Cancelled : public std::runtime_error {
 public:
  Cancelled() : std::runtime_error("cancelled") {}
};

}  // namespace strata::gui
