#include "sim/memory_timeline.h"

#include <algorithm>
#include <map>
#include <utility>

#include "plan/pipeline_schedule.h"
#include "plan/plan_spec.h"

namespace strata::sim {

std::vector<RankMemory> memory_timeline(const Workload& w, const RunResult& run, const MemoryReport& memory,
                                        const ModelSpec& model, const PlanSpec& plan, const DeviceMemory& device) {
  const int n = w.graph.num_ranks();
  std::vector<RankMemory> out(n);
  const bool zero_bubble = splits_backward(plan.schedule);
  for (int r = 0; r < n; ++r) {
    const StageMemory& st = memory.stages[std::min<std::size_t>(w.stage[r], memory.stages.size() - 1)];
    // Per chunk-micro-batch: its first forward's start, its last backward's
    // (B's) end, and its last weight-gradient (W's) end.
    struct Held {
      TimeNs forward = -1, backward = -1, weight_grad = -1;
    };
    std::map<std::pair<int, int>, Held> held;
    for (TaskId t : w.stream(r, StreamKind::kCompute)) {
      const TaskInfo& info = w.notes.info(t);
      if (info.microbatch < 0) continue;
      Held& h = held[{info.microbatch, info.chunk}];
      switch (w.notes.label_of_task(t).phase) {
        case Phase::kForward:
          if (h.forward < 0 || run.start_ns[t] < h.forward) h.forward = run.start_ns[t];
          break;
        case Phase::kBackward: h.backward = std::max(h.backward, run.end_ns[t]); break;
        case Phase::kWeightGrad: h.weight_grad = std::max(h.weight_grad, run.end_ns[t]); break;
        default: break;
      }
    }
    RankMemory& rm = out[r];
    const double layers_per_chunk = static_cast<double>(st.layers) / std::max(1, plan.vpp);
    rm.model_in_flight = layers_per_chunk > 0 ? st.layer_microbatches_in_flight / layers_per_chunk : 0.0;
    // A chunk-micro-batch's full activations, in proportion to the model's peak
    // (less what deferred W's hold there); from B to W only its W inputs.
    const double full_chunk =
        rm.model_in_flight > 0 ? (st.activations_bytes - st.weight_grad_bytes) / rm.model_in_flight : 0.0;
    const double waiting_chunk = zero_bubble ? weight_grad_input_bytes(model, plan) * layers_per_chunk : 0.0;
    // Changes of the held bytes, and of the full chunk-micro-batches held.
    struct Step {
      TimeNs t;
      double bytes;
      int full;
    };
    std::vector<Step> steps;
    for (const auto& [key, h] : held) {
      if (h.forward < 0 || h.backward < 0) continue;
      steps.push_back({h.forward, full_chunk, +1});
      steps.push_back({h.backward, -full_chunk, -1});
      if (zero_bubble && h.weight_grad >= h.backward) {
        steps.push_back({h.backward, waiting_chunk, 0});
        steps.push_back({h.weight_grad, -waiting_chunk, 0});
      }
    }
    // At one instant the releases first (the caching allocator reuses a freed
    // block for the next allocation).
    std::sort(steps.begin(), steps.end(),
              [](const Step& a, const Step& b) { return std::make_pair(a.t, a.bytes) < std::make_pair(b.t, b.bytes); });
    const double frag = 1.0 + device.allocator_fragmentation;
    const double held_all_step = st.total_bytes - st.activations_bytes * frag;
    rm.points.push_back({0, held_all_step});
    double activations = 0.0;
    int full = 0;
    for (std::size_t i = 0; i < steps.size();) {
      const TimeNs t = steps[i].t;
      for (; i < steps.size() && steps[i].t == t; ++i) {
        activations += steps[i].bytes;
        full += steps[i].full;
      }
      rm.peak_in_flight = std::max(rm.peak_in_flight, full);
      const double bytes = held_all_step + std::max(0.0, activations) * frag;
      if (rm.points.back().t_ns == t) {
        rm.points.back().bytes = bytes;
      } else {
        rm.points.push_back({t, bytes});
      }
    }
  }
  return out;
}

}  // namespace strata::sim
