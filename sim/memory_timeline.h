// Memory over one step, per simulated rank: the memory model's stage figures
// (plan/memory_model.h) laid along the simulated schedule. Weights, gradients,
// optimizer state, buffers and the framework's reserve are held all step; the
// activations rise as the rank starts each micro-batch's forward of a model chunk
// and fall when that chunk's backward ends. Activations are counted per
// chunk-micro-batch in flight, in proportion to the memory model's figure at its
// peak, so the curve reaches the model's stage total exactly when the schedule
// holds as many chunk-micro-batches as the model's in-flight count says
// (tests/sim/memory_timeline_test.cc checks both agree). Zero-bubble schedules:
// from B's end to W's end a chunk-micro-batch holds only its W inputs (the
// model's weight_grad_input_bytes per layer). Within a chunk the activations of
// its layers are not resolved one by one; recompute's transient working set and
// the output layer's logits are held all step; the output layer's W inputs of a
// zero-bubble schedule's last stage are not followed (the curve peaks below the
// model's total there by at most them).
#pragma once

#include <vector>

#include "plan/memory_model.h"
#include "sim/engine/engine.h"
#include "sim/workload/workload.h"

namespace strata::sim {

struct MemoryPoint {
  TimeNs t_ns = 0;
  double bytes = 0.0;  // from t_ns until the next point
};

struct RankMemory {
  std::vector<MemoryPoint> points;  // by time; the first at 0
  int peak_in_flight = 0;           // most chunk-micro-batches held at once
  double model_in_flight = 0.0;     // the memory model's count at its peak, in chunk-micro-batches
};

// Per simulated rank. device gives the allocator's fragmentation share (the
// reserve grows with the activations as the memory model's does).
std::vector<RankMemory> memory_timeline(const Workload& workload, const RunResult& run, const MemoryReport& memory,
                                        const ModelSpec& model, const PlanSpec& plan, const DeviceMemory& device);

}  // namespace strata::sim
