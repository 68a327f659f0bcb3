// The vocabulary of every trace we write or read (docs/formats.md, "trace.json"):
// the categories of events, the lanes (threads) of a rank, the phases of a step.
// The simulator's trace writer, the runtime's recorder and the GUI's reader use
// these, so a simulated and a measured trace say the same things the same way.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace strata::trace {

// kHost: the host (CPU) issuing kernels (the framework's per-kernel dispatch cost).
// kCp: context parallelism's K/V exchanges (after kHost, so the others keep their values).
// kBubble: a compute stream waiting for the other pipeline stages; kWait: waiting
// for a slower rank of its own stage (a straggler, load imbalance) — the
// "exposed" lane's account of idle time; no task of either category runs.
enum class Category : std::uint8_t {
  kGemm, kAttention, kElementwise, kTp, kPp, kDp, kZero, kOptimizer, kCopy, kHost, kCp, kEp, kBubble, kWait
};
inline constexpr int kNumCategories = 14;
const char* to_string(Category c);
// The category named s; false when s is not one of the fourteen names.
bool parse_category(std::string_view s, Category* out);
// Tensor-, context-, expert-, pipeline- and data-parallel traffic and ZeRO's
// gathers (ep: the MoE layers' token all-to-alls and expert tensor-parallel
// collectives).
bool is_communication(Category c);

// A rank's lanes, its trace thread ids 0..7 in this order. dp-reduce: ZeRO-3's
// gradient reduce-scatters where the framework runs them on a stream of their own
// (FSDP's post-backward stream); every other data-parallel collective is on dp-comm.
// host: the CPU thread that issues the kernels, where the framework's profile
// costs kernel dispatch (eager PyTorch); the GPU's kernels wait on it.
enum class Lane : std::uint8_t { kCompute, kTpComm, kDpComm, kPpSend, kPpRecv, kCopy, kDpReduce, kHost };
inline constexpr int kNumLanes = 8;
const char* to_string(Lane lane);

// The simulator's "exposed" lane, trace thread id 8: not a stream that runs work
// but the account of every idle moment of the compute stream — exposed
// communication by kind, host dispatch, pipeline bubble (sim/metrics.h).
inline constexpr int kExposedLaneTid = kNumLanes;
inline constexpr const char* kExposedLaneName = "exposed";

// kWeightGrad: a zero-bubble schedule's W (weight gradients deferred from the
// backward, whose input-gradient half B stays kBackward).
enum class Phase : std::uint8_t { kForward, kBackward, kRecompute, kStep, kWeightGrad };
const char* to_string(Phase p);  // "fwd", "bwd", "recompute", "step", "wgrad"
bool parse_phase(std::string_view s, Phase* out);

// Every name a reader accepts, comma-separated, for error messages.
std::string category_names();  // "gemm, attention, ..."
std::string phase_names();     // "fwd, bwd, recompute, step, wgrad"

}  // namespace strata::trace
