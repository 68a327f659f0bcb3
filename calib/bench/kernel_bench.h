// Memory-bound kernel microbenchmarks: each kernel kind a training step runs,
// over buffer sizes, as bytes moved (read + written) against time.
#pragma once

#include <functional>
#include <map>
#include <vector>

#include "calib/bench/measure.h"
#include "costmodel/cost_sections.h"
#include "runtime/device/device.h"

namespace strata::calib {

// Bytes a kernel of this kind reads and writes per element of its main tensor,
// as the simulator counts them (sim/layer_ops.cc): norm and softmax read x and
// write y (2), residual add and axpy read two and write one (3), activation
// reads x and writes y (2), a copy reads and writes (2), and the fp32 Adam step
// reads param, grad and both moments and writes three of them (7 x 4 bytes).
double bytes_per_element(KernelKind kind, DType storage);

// Rows of 1024 elements a kernel of this kind runs on to move about
// target_bytes (at least one row).
std::int64_t kernel_rows(KernelKind kind, DType storage, double target_bytes);

// Times every kernel kind at each target size (bytes moved; rounded to whole
// rows of 1024 elements; a target rounding to rows already measured is
// skipped, so every curve has distinct sizes). Training tensors are requested as bf16 (the device may
// store them wider: the cpu backend stores fp32); Adam is fp32. Checks the
// residual add and the copy exactly and every other output for finite values.
// progress(i) is called after each (kind, size). Throws InternalError on a wrong result.
std::map<KernelKind, std::vector<SizePoint>> bench_memory_bound(
    rt::Device& device, const std::vector<double>& sizes_bytes, const TimingOptions& timing,
    const std::function<void(std::size_t)>& progress);

// Pinned host <-> device copies over sizes: {host_to_device, device_to_host}.
// Checks a few bytes of each copy.
std::pair<std::vector<SizePoint>, std::vector<SizePoint>> bench_host_copies(
    rt::Device& device, const std::vector<double>& sizes_bytes, const TimingOptions& timing,
    const std::function<void(std::size_t)>& progress);

}  // namespace strata::calib
