// The vocabulary of every trace we write or read (docs/formats.md, "trace.json"):
// the categories of events, the lanes (threads) of a rank, the phases of a step.
// The simulator's trace writer, the runtime's recorder and the GUI's reader use
// these, so a simulated and a measured trace say the same things the same way.
#pragma once

#include <cstdint>
#include <string_view>

namespace strata::trace {

enum class Category : std::uint8_t { kGemm, kAttention, kElementwise, kTp, kPp, kDp, kZero, kOptimizer, kCopy };
inline constexpr int kNumCategories = 9;
const char* to_string(Category c);
// The category named s; false when s is not one of the nine names.
bool parse_category(std::string_view s, Category* out);
// Tensor-, pipeline- and data-parallel traffic and ZeRO's gathers.
bool is_communication(Category c);

// A rank's lanes, its trace thread ids 0..6 in this order. dp-reduce: ZeRO-3's
// gradient reduce-scatters where the framework runs them on a stream of their own
// (FSDP's post-backward stream); every other data-parallel collective is on dp-comm.
enum class Lane : std::uint8_t { kCompute, kTpComm, kDpComm, kPpSend, kPpRecv, kCopy, kDpReduce };
inline constexpr int kNumLanes = 7;
const char* to_string(Lane lane);

enum class Phase : std::uint8_t { kForward, kBackward, kRecompute, kStep };
const char* to_string(Phase p);  // "fwd", "bwd", "recompute", "step"
bool parse_phase(std::string_view s, Phase* out);

}  // namespace strata::trace
