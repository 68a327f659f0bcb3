// A group of one rank: every collective is a local copy on the device. Lets a
// plain run (no mpirun) use the same code paths as a multi-rank one.
#pragma once

#include <memory>

#include "runtime/comm/communicator.h"

namespace strata::rt {

// The one-rank communicator on device.
std::unique_ptr<Communicator> make_self_communicator(Device& device, const CommOptions& options);

}  // namespace strata::rt
