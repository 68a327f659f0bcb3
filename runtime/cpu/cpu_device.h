// The cpu backend's Device: Eigen kernels in fp32 on the host.
//
// Every floating-point request (bf16, fp16, tf32, fp32) is stored and computed
// in fp32, and DeviceInfo says so. Kernels run to completion before returning,
// so events are steady_clock readings and synchronize() has nothing to wait for.
// Compute threads: DeviceOptions::cpu_threads, or the cores this process may
// use divided by the ranks on this node (ranks x threads <= cores). Row-wise
// kernels split rows over OpenMP threads; column reductions (dgamma, dbias,
// sums) run in one fixed order, so results do not depend on the thread count.
// Eigen's GEMM thread count is process-wide (Eigen::setNbThreads): one cpu
// Device per process.
#pragma once

#include <memory>

#include "runtime/device/device.h"

namespace strata::rt {

// Creates the cpu device. Never fails for want of hardware.
std::unique_ptr<Device> make_cpu_device(const DeviceOptions& options);

}  // namespace strata::rt
