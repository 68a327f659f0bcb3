#include "core/trace_vocabulary.h"

#include <iterator>

namespace strata::trace {

namespace {

// In Category's order. string_views: a reader parses one per event, and comparing
// views costs no strlen.
constexpr std::string_view kCategoryNames[kNumCategories] = {
    "gemm", "attention", "elementwise", "tp", "pp", "dp", "zero", "optimizer", "copy", "host", "cp", "ep", "bubble", "wait"};
// In Phase's order.
constexpr std::string_view kPhaseNames[] = {"fwd", "bwd", "recompute", "step", "wgrad"};

}  // namespace

const char* to_string(Category c) { return kCategoryNames[static_cast<int>(c)].data(); }

bool parse_category(std::string_view s, Category* out) {
  for (int i = 0; i < kNumCategories; ++i) {
    if (s == kCategoryNames[i]) {
      *out = static_cast<Category>(i);
      return true;
    }
  }
  return false;
}

bool is_communication(Category c) {
  return c == Category::kTp || c == Category::kCp || c == Category::kEp || c == Category::kPp || c == Category::kDp ||
         c == Category::kZero;
}

const char* to_string(Lane lane) {
  switch (lane) {
    case Lane::kCompute: return "compute";
    case Lane::kTpComm: return "tp-comm";
    case Lane::kDpComm: return "dp-comm";
    case Lane::kPpSend: return "pp-send";
    case Lane::kPpRecv: return "pp-recv";
    case Lane::kCopy: return "copy";
    case Lane::kDpReduce: return "dp-reduce";
    case Lane::kHost: return "host";
  }
  return "compute";
}

const char* to_string(Phase p) { return kPhaseNames[static_cast<int>(p)].data(); }

bool parse_phase(std::string_view s, Phase* out) {
  for (std::size_t i = 0; i < std::size(kPhaseNames); ++i) {
    if (s == kPhaseNames[i]) {
      *out = static_cast<Phase>(i);
      return true;
    }
  }
  return false;
}

namespace {
template <std::size_t N>
std::string joined(const std::string_view (&names)[N]) {
  std::string out;
  for (std::string_view n : names) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}
}  // namespace

std::string category_names() { return joined(kCategoryNames); }
std::string phase_names() { return joined(kPhaseNames); }

}  // namespace strata::trace
