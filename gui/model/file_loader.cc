#include "gui/model/file_loader.h"

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/json_reader.h"
#include "gui/model/trace_reader.h"

namespace strata::gui {
namespace {

namespace fs = std::filesystem;

// Traces are the only big files; their "traceEvents" key comes within the first
// bytes (Strata writes it first; Perfetto's exporters too), so the head decides.
constexpr std::size_t kSniffBytes = 64 * 1024;

const char* kAccepted =
    "expected a Strata file: trace.json (a \"traceEvents\" array), result.json "
    "(\"schema\": \"strata-result/1\"), sweep.json (\"schema\": \"strata-sweep/1\"), "
    "memory.json (a \"memory\" object) or sweep.csv";

}  // namespace

const char* to_string(FileKind k) {
  switch (k) {
    case FileKind::kTrace:
      return "trace";
    case FileKind::kResult:
      return "result";
    case FileKind::kMemory:
      return "memory";
    case FileKind::kSweep:
      return "sweep";
  }
  return "trace";
}

FileKind detect_file_kind(const std::string& path) {
  if (fs::path(path).extension() == ".csv") return FileKind::kSweep;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "", "cannot open file for reading");
  std::string head(kSniffBytes, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  if (head.find("\"traceEvents\"") != std::string::npos) return FileKind::kTrace;
  const nlohmann::json doc = json::parse_file(path);
  if (!doc.is_object()) throw InputError(path, "$", kAccepted);
  if (doc.contains("traceEvents")) return FileKind::kTrace;
  auto schema = doc.find("schema");
  if (schema != doc.end() && schema->is_string()) {
    const std::string s = schema->get<std::string>();
    if (s == "strata-result/1") return FileKind::kResult;
    if (s == "strata-sweep/1") return FileKind::kSweep;
    throw InputError(path, "$.schema", std::string("unknown schema \"") + s + "\"; " + kAccepted);
  }
  if (doc.contains("memory")) return FileKind::kMemory;
  throw InputError(path, "$", kAccepted);
}

LoadedFile load_file(const std::string& path, const ProgressFn& progress) {
  LoadedFile f;
  f.path = path;
  f.kind = detect_file_kind(path);
  switch (f.kind) {
    case FileKind::kTrace:
      f.trace = std::make_shared<TraceModel>(read_trace_file(path, progress));
      break;
    case FileKind::kResult: {
      f.result = read_result_file(path);
      // `strata simulate --out DIR` writes DIR/result.json and DIR/trace.json.
      const fs::path beside = fs::path(path).parent_path() / "trace.json";
      if (fs::exists(beside)) {
        f.trace = std::make_shared<TraceModel>(read_trace_file(beside.string(), progress));
      }
      break;
    }
    case FileKind::kMemory:
      f.memory = read_memory_file(path);
      break;
    case FileKind::kSweep:
      f.sweep = fs::path(path).extension() == ".csv" ? read_sweep_csv(path) : read_sweep_json(path);
      break;
  }
  return f;
}

}  // namespace strata::gui
