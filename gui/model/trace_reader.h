// Reading trace.json (docs/formats.md, "trace.json") into a TraceModel.
//
// A trace of a million tasks is a few hundred megabytes of JSON: it is streamed
// through nlohmann::json's SAX interface in 4 MiB chunks, so no document tree of
// the events is ever built (docs/performance.md has the measurements).
#pragma once

#include <string>

#include "gui/model/load_progress.h"
#include "gui/model/trace_model.h"

namespace strata::gui {

// Reads the trace at path. progress (may be empty) is called after each chunk
// with the fraction of the file read; when it returns false the read stops and
// Cancelled is thrown. Throws InputError naming the file and the JSON path
// ("$.traceEvents[12].cat") for an unreadable file, malformed JSON (with line and
// column), or a complete ("X") event without pid, tid, ts, dur or a known cat.
// Events of other phases than "X" and "M" are ignored.
TraceModel read_trace_file(const std::string& path, const ProgressFn& progress = {});

// Reads trace JSON held in memory; file_label names it in errors.
TraceModel read_trace_text(const std::string& text, const std::string& file_label);

}  // namespace strata::gui
