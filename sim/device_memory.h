// The device side of the memory model (plan/memory_model.h) read from a device
// profile: plan/ knows no profiles, the simulator and its front-ends do.
#pragma once

#include "costmodel/profile.h"
#include "plan/memory_model.h"

namespace strata {

inline DeviceMemory device_memory(const Profile& profile) {
  return {profile.device.memory_bytes, profile.memory.framework_reserve_bytes,
          profile.memory.allocator_fragmentation};
}

}  // namespace strata
