// Data parallelism and ZeRO: pass 3 of a workload build. Per pipeline rank and
// tensor-parallel rank, over its data-parallel group: each gradient bucket's
// reduction (all-reduce with ZeRO-0, reduce-scatter with ZeRO >= 1, every
// micro-batch with ZeRO-2) once its gradients are final, the ZeRO-1/2 weight
// gathers before first use or after the update, ZeRO-3's gathers and
// reduce-scatters around every layer; then the tied embedding's sum between the
// first and last stage, the gradient norm, and the optimizer step of each rank's
// shard (on the device, or on the host with offload).
#pragma once

#include "sim/workload/build.h"

namespace strata::sim {

// Needs the layer program's marks (pass 1).
void add_data_parallel_and_step(WorkloadBuild& b);

}  // namespace strata::sim
