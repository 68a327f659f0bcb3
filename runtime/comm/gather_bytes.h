// Every rank's bytes on every rank, over any Communicator: the way host-side
// results (a measured trace, a sweep shard's outcomes) travel between ranks.
#pragma once

#include <string>
#include <vector>

#include "runtime/comm/communicator.h"

namespace strata::rt {

// result[r] = rank r's `mine`, byte for byte, on every rank. Collective over
// world; the buffers live on world.device(). The communicators move fp32
// tensors on every backend and reduce none here, so each element carries two
// bytes as an integer 0..65535 (exact in fp32): no bit pattern is left to a
// transport's handling of NaNs or denormals.
std::vector<std::string> all_gather_bytes(Communicator& world, const std::string& mine);

}  // namespace strata::rt
