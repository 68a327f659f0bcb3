// Opening any file the GUI shows: trace.json (predicted or measured),
// result.json (with the trace.json beside it), memory.json, sweep.csv and
// sweep.json. The kind is recognised from the content, not the name. Qt-free,
// so it runs on a worker thread and in tests.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "gui/model/load_progress.h"
#include "gui/model/result_data.h"
#include "gui/model/sweep_data.h"
#include "gui/model/trace_model.h"

namespace strata::gui {

enum class FileKind { kTrace, kResult, kMemory, kSweep };
const char* to_string(FileKind k);

// What one file held. Exactly the members of its kind are set.
struct LoadedFile {
  FileKind kind = FileKind::kTrace;
  std::string path;
  std::shared_ptr<const TraceModel> trace;  // kTrace; kResult when trace.json sits beside it
  std::optional<ResultData> result;         // kResult
  std::optional<MemoryFile> memory;         // kMemory
  std::optional<SweepData> sweep;           // kSweep
};

// Recognises the kind of the file at path: ".csv" is a sweep; JSON is a trace when
// it has "traceEvents", else by its "schema" ("strata-result/1", "strata-sweep/1"),
// else memory.json when it has "memory". Throws InputError (unreadable, malformed,
// or none of these, naming what is accepted).
FileKind detect_file_kind(const std::string& path);

// Reads the file (see detect_file_kind). progress covers reading a trace (the
// only slow kind). Throws InputError naming the file and the JSON path, or
// Cancelled.
LoadedFile load_file(const std::string& path, const ProgressFn& progress = {});

}  // namespace strata::gui
