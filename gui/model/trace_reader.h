// Reading trace.json (docs/formats.md, "trace.json") into a TraceModel.
//
// A trace of a million tasks is about 180 MB of JSON. It is read into memory and
// parsed with nlohmann::json's SAX interface straight into the compact model, so
// no document tree of the events is ever built; a big trace written one event per
// line (as sim/trace_writer writes it) is cut into parts parsed by one thread
// each (docs/performance.md, "strata-gui", has the measurements).
//
// The pieces: mapped_file.h (the file in memory), trace_input.h (the cancellable
// input), trace_parser.h (the SAX parser of one part) and, here, cutting a file
// into parts, parsing them on threads and merging them.
#pragma once

#include <cstddef>
#include <string>

#include "gui/model/load_progress.h"
#include "gui/model/trace_model.h"

namespace strata::gui {

// How a big trace written one event per line is cut into parts, one thread each.
struct TraceParts {
  std::size_t parallel_min_bytes = std::size_t{32} << 20;  // smaller texts: one part
  std::size_t min_part_bytes = std::size_t{16} << 20;      // each thread gets at least this
  unsigned threads = 0;  // 0: the machine's hardware threads, at most 8
};

// Reads the trace at path. progress (may be empty) is called every 4 MiB parsed
// with the fraction done; when it returns false the read stops and Cancelled is
// thrown. Throws InputError naming the file and the JSON path
// ("$.traceEvents[12].cat") for an unreadable file, malformed JSON (with line and
// column), or a complete ("X") event without pid, tid, ts, dur or a known cat.
// Events of other phases than "X" and "M" are ignored.
TraceModel read_trace_file(const std::string& path, const ProgressFn& progress = {});
TraceModel read_trace_file(const std::string& path, const ProgressFn& progress, const TraceParts& parts);

// Reads trace JSON held in memory; file_label names it in errors. The first
// form parses it as one part.
TraceModel read_trace_text(const std::string& text, const std::string& file_label);
TraceModel read_trace_text(const std::string& text, const std::string& file_label, const TraceParts& parts);

}  // namespace strata::gui
