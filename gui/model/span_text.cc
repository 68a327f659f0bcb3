#include "gui/model/span_text.h"

#include <fmt/format.h>

#include <cmath>

#include "gui/model/time_view.h"

namespace strata::gui {

std::string format_flops(double flops) {
  static constexpr const char* kUnits[] = {"FLOP",  "kFLOP", "MFLOP", "GFLOP",
                                           "TFLOP", "PFLOP", "EFLOP"};
  int u = 0;
  while (std::abs(flops) >= 1000.0 && u < 6) {
    flops /= 1000.0;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} {}", flops, kUnits[u])
                : fmt::format("{:.3g} {}", flops, kUnits[u]);
}

std::string format_bytes(double bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (std::abs(bytes) >= 1024.0 && u < 5) {
    bytes /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.1f} {}", bytes, kUnits[u]);
}

std::string span_description(const TraceModel& trace, const Lane& lane, const Span& span) {
  const SpanDetail& d = trace.detail_of(span);
  std::string out = fmt::format("{}\ncategory: {}\nrank {} · {}", trace.name_of(span),
                                to_string(span.category), lane.global_rank, lane.stream_label);
  if (d.mb >= 0) out += fmt::format("\nmicro-batch: {}", d.mb);
  if (d.layer >= 0) out += fmt::format("\nlayer: {}", d.layer);
  if (d.chunk > 0) out += fmt::format("\nchunk: {}", d.chunk);
  if (d.phase != Phase::kNone) out += fmt::format("\nphase: {}", to_string(d.phase));
  out += "\nstart: " + format_time_ns(static_cast<double>(span.start_ns));
  out += "\nduration: " + format_time_ns(static_cast<double>(span.dur_ns));
  const double seconds = static_cast<double>(span.dur_ns) * 1e-9;
  if (d.flops > 0.0) {
    out += "\nFLOPs: " + format_flops(d.flops);
    if (seconds > 0.0) out += fmt::format(" ({:.1f} TFLOP/s)", d.flops / seconds / 1e12);
  }
  if (d.bytes > 0.0) {
    out += "\nbytes: " + format_bytes(d.bytes);
    if (seconds > 0.0) out += fmt::format(" ({:.1f} GB/s)", d.bytes / seconds / 1e9);
  }
  return out;
}

std::string merged_description(const Lane& lane, std::uint32_t count, TimeNs start_ns,
                               TimeNs end_ns, const std::string& block) {
  return fmt::format("{}{} tasks merged (zoom in to see each)\nrank {} · {}\nfrom {} to {}",
                     block.empty() ? "" : block + "\n", count, lane.global_rank, lane.stream_label,
                     format_time_ns(static_cast<double>(start_ns)), format_time_ns(static_cast<double>(end_ns)));
}

namespace {
// The letter and the words of a phase in a step block; nullptr for none.
const char* phase_letter(Phase p) {
  switch (p) {
    case Phase::kFwd: return "F";
    case Phase::kBwd: return "B";
    case Phase::kWgrad: return "W";
    case Phase::kRecompute: return "R";
    case Phase::kNone:
    case Phase::kStep: break;
  }
  return nullptr;
}
const char* phase_words(Phase p) {
  switch (p) {
    case Phase::kFwd: return "forward";
    case Phase::kBwd: return "backward";
    case Phase::kWgrad: return "weight gradients";
    case Phase::kRecompute: return "recompute";
    case Phase::kNone:
    case Phase::kStep: break;
  }
  return nullptr;
}
}  // namespace

std::string step_block_label(const SpanDetail& d, bool chunks) {
  const char* letter = phase_letter(d.phase);
  if (d.mb < 0 || letter == nullptr) return {};
  return chunks ? fmt::format("{}{}.{}", letter, d.mb, d.chunk) : fmt::format("{}{}", letter, d.mb);
}

std::string step_block_words(const SpanDetail& d, bool chunks) {
  const char* words = phase_words(d.phase);
  if (d.mb < 0 || words == nullptr) return {};
  return chunks ? fmt::format("{} of micro-batch {}, chunk {}", words, d.mb, d.chunk)
                : fmt::format("{} of micro-batch {}", words, d.mb);
}

}  // namespace strata::gui
