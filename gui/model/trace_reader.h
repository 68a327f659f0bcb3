// Reading trace.json (docs/formats.md, "trace.json") into a TraceModel.
//
// A trace of a million tasks is about 180 MB of JSON. It is read into memory and
// parsed with nlohmann::json's SAX interface straight into the compact model, so
// no document tree of the events is ever built; a big trace written one event per
// line (as sim/trace_writer writes it) is cut into parts parsed by one thread
// each (docs/performance.md, "strata-gui", has the measurements).
#pragma once

#include <string>

#include "gui/model/load_progress.h"
#include "gui/model/trace_model.h"

namespace strata::gui {

// Reads the trace at path. progress (may be empty) is called every 4 MiB parsed
// with the fraction done; when it returns false the read stops and Cancelled is
// thrown. Throws InputError naming the file and the JSON path
// ("$.traceEvents[12].cat") for an unreadable file, malformed JSON (with line and
// column), or a complete ("X") event without pid, tid, ts, dur or a known cat.
// Events of other phases than "X" and "M" are ignored.
TraceModel read_trace_file(const std::string& path, const ProgressFn& progress = {});

// Reads trace JSON held in memory; file_label names it in errors.
TraceModel read_trace_text(const std::string& text, const std::string& file_label);

}  // namespace strata::gui
