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

// The hover text of a mark that merges several tasks; block, its step block's
// words ("forward of micro-batch 3, chunk 1") when it has one.
std::string merged_description(const Lane& lane, std::uint32_t count, TimeNs start_ns,
                               TimeNs end_ns, const std::string& block = {});

// The label painted inside a step block wide enough, as the pipeline figures of
// the Megatron and zero-bubble papers number them: "F3" (forward of micro-batch
// 3), "B3", "W3", "R3" (recompute), with the chunk when the schedule is
// interleaved ("F3.1"); "" for a task of no micro-batch.
std::string step_block_label(const SpanDetail& detail, bool chunks);
// The same in words: "forward of micro-batch 3, chunk 1"; "" when none.
std::string step_block_words(const SpanDetail& detail, bool chunks);

}  // namespace strata::gui
