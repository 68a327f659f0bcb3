// What a simulated step means to the user: step time, MFU/HFU, where each rank's
// compute stream waited (pipeline bubble, exposed communication by kind).
//
// Each idle gap on a rank's compute stream is attributed by following the chain of
// what the next compute task waited for: the part of the gap during which the
// blocking communication ran is exposed communication of its kind; the part before
// it, when the chain leads to a pipeline transfer or to the step's start or end, is
// pipeline bubble (warm-up and flush); when it leads, without a pipeline transfer,
// to the compute of another rank of the same stage (a slower tensor-, data- or
// expert-parallel peer), it is waiting for that peer (stragglers, load imbalance).
// After a rank's last compute, its own communication and copies still running are
// exposed (an offloaded optimizer's host step on the copy lane is offload); the
// rest is the other stages' flush (bubble) — or, with a single stage, slower peers.
// With uniform stages and free communication this gives the bubble (p-1)/(m+p-1)
// exactly.
#pragma once

#include <array>
#include <vector>

#include "sim/engine/engine.h"
#include "sim/workload/workload.h"

namespace strata::sim {

// kCp last, so the others keep their indices (sweep.csv's columns).
enum class CommKind { kTp, kPp, kDp, kZero, kOffload, kCp, kEp };
inline constexpr int kNumCommKinds = 7;
const char* to_string(CommKind k);

struct RankMetrics {
  double compute_s = 0.0;
  double bubble_s = 0.0;
  double host_s = 0.0;  // compute stream idle waiting for the host to issue its next kernel
  double peer_wait_s = 0.0;  // compute stream idle waiting for a slower rank of its stage
  std::array<double, kNumCommKinds> exposed_s{};
};

struct StepMetrics {
  double step_time_s = 0.0;
  std::vector<RankMetrics> ranks;          // per simulated rank
  std::vector<double> bubble_ratio_per_stage;
  double bubble_ratio = 0.0;               // mean over stages
  double compute_s = 0.0;                  // mean over ranks
  double host_s = 0.0;                     // mean over ranks: GPU idle waiting for kernel issue
  double peer_wait_s = 0.0;                // mean over ranks: waiting for a slower rank of the stage
  std::array<double, kNumCommKinds> exposed_s{};  // mean over ranks
};

StepMetrics step_metrics(const Workload& workload, const RunResult& run);

// step_metrics(...).step_time_s alone, without the per-rank accounting (sampled
// steps want only the step's time).
double step_time_s(const Workload& workload, const RunResult& run);

// One idle interval of a rank's compute stream and why it waited: exposed
// communication of a kind (tp, cp, ep, pp, dp, zero; copy for offload), the host
// issuing kernels (host), the other pipeline stages (bubble), or a slower rank of
// its stage (wait). blocker is the task it waited for (-1 for bubble; for wait
// that peer's compute task, -1 after the rank's last compute). The intervals are the pieces step_metrics adds: per
// rank their durations sum to its bubble_s, host_s, peer_wait_s and exposed_s; a
// folded block's collectives appear where the block runs them.
struct ComputeWait {
  TimeNs start_ns = 0;
  TimeNs end_ns = 0;
  Category why = Category::kBubble;
  TaskId blocker = -1;
};

// Per simulated rank, its compute stream's waits sorted by start.
std::vector<std::vector<ComputeWait>> compute_stream_waits(const Workload& workload, const RunResult& run);

}  // namespace strata::sim
