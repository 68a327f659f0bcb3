// Progress and cancellation of long GUI work (reading a big trace, a simulation,
// a sweep): the contract of core/progress.h, which the simulator's and the
// sweep's callbacks also follow, so one worker drives them all.
#pragma once

#include "core/progress.h"

namespace strata::gui {

using strata::Cancelled;
using strata::ProgressFn;
using strata::report_progress;

}  // namespace strata::gui
