// The words the timeline shows for a task (hover tooltip, details panel) and the
// units it uses. Qt-free, so the texts are tested without a display.
#pragma once

#include <string>

#include "gui/model/trace_model.h"

namespace strata::gui {

// Decimal FLOPs as papers quote them: "3.22 TFLOP", "850 MFLOP".
std::string format_flops(double flops);
// Binary sizes as memory is reported, one decimal: "1.5 GiB", "12.0 MiB", "512 B".
std::string format_bytes(double bytes);

// One line per field: name, category, rank and stream, micro-batch, layer,
// chunk, phase, start, duration, FLOPs and bytes (the last two with the achieved
// rate, TFLOP/s or GB/s, when the task has a duration). Fields that are absent
// (mb -1, layer -1, zero FLOPs) are left out. Lines are separated by '\n'.
std::string span_description(const TraceModel& trace, const Lane& lane, const Span& span);

// The hover text of a mark that merges several tasks.
std::string merged_description(const Lane& lane, std::uint32_t count, TimeNs start_ns,
                               TimeNs end_ns);

}  // namespace strata::gui
