#include "gui/model/trace_reader.h"

#include <algorithm>
#include <cctype>
#include <exception>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "gui/model/mapped_file.h"
#include "gui/model/trace_parser.h"

namespace strata::gui {
namespace {

using trace_input::ParseProgress;
using trace_input::Piece;

// The most threads one file is parsed by when the machine decides.
constexpr unsigned kMaxThreads = 8;

// Where the events start when text begins {"traceEvents":[ (whitespace allowed),
// as sim/trace_writer writes it; npos otherwise.
std::size_t events_start(std::string_view text) {
  std::size_t i = 0;
  auto skip_space = [&] {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  };
  auto expect = [&](std::string_view token) {
    skip_space();
    if (text.compare(i, token.size(), token) != 0) return false;
    i += token.size();
    return true;
  };
  if (expect("{") && expect("\"traceEvents\"") && expect(":") && expect("[")) return i;
  return std::string::npos;
}

// Parses a big trace written one event per line in parts, one thread each: the
// file is cut after a "},\n{" (a line break can only sit between JSON tokens, and
// such a line start is an event of traceEvents in a one-event-per-line trace),
// and each part is made a complete trace by a {"traceEvents":[ before it and a ]}
// after it. A cut anywhere else leaves a part unbalanced, which its parse reports;
// then, and on any error, this returns nullopt and the caller parses the file as
// one part, so errors name the right line and event. Throws Cancelled.
std::optional<TraceModel> parse_in_parts(std::string_view text, const std::string& file,
                                         ParseProgress* shared, const TraceParts& options) {
  static constexpr char kOpen[] = "{\"traceEvents\":[";
  static constexpr char kClose[] = "]}";
  const unsigned threads =
      options.threads > 0 ? options.threads : std::min(kMaxThreads, std::thread::hardware_concurrency());
  if (text.size() < options.parallel_min_bytes || threads < 2) return std::nullopt;
  if (events_start(text) == std::string::npos) return std::nullopt;
  const std::size_t parts =
      std::min<std::size_t>(threads, text.size() / std::max<std::size_t>(1, options.min_part_bytes));
  // Part k covers [starts[k], ends[k]).
  std::vector<std::size_t> starts{0}, ends;
  for (std::size_t k = 1; k < parts; ++k) {
    const std::size_t at = text.find("},\n{", std::max(k * text.size() / parts, starts.back()));
    if (at == std::string::npos) break;
    ends.push_back(at + 1);
    starts.push_back(at + 3);
  }
  ends.push_back(text.size());
  if (starts.size() < 2) return std::nullopt;

  const char* base = text.data();
  std::vector<std::vector<Piece>> pieces(starts.size());
  for (std::size_t k = 0; k < starts.size(); ++k) {
    if (k > 0) pieces[k].push_back({kOpen, kOpen + sizeof(kOpen) - 1});
    pieces[k].push_back({base + starts[k], base + ends[k]});
    if (k + 1 < starts.size()) pieces[k].push_back({kClose, kClose + sizeof(kClose) - 1});
  }
  std::vector<ParsedPart> results(starts.size());
  std::vector<std::exception_ptr> errors(starts.size());
  std::vector<std::thread> workers;
  for (std::size_t k = 1; k < starts.size(); ++k) {
    workers.emplace_back([&, k] {
      try {
        results[k] = parse_part(pieces[k], file, shared, false);
      } catch (...) {
        errors[k] = std::current_exception();
        shared->cancelled = true;  // stop the others early
      }
    });
  }
  try {
    results[0] = parse_part(pieces[0], file, shared, true);
  } catch (...) {
    errors[0] = std::current_exception();
    shared->cancelled = true;
  }
  for (std::thread& w : workers) w.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  if (shared->cancelled) throw Cancelled();
  for (const ParsedPart& r : results) {
    if (!r.complete()) return std::nullopt;
  }
  for (std::size_t k = 1; k < results.size(); ++k) results[0].append(std::move(results[k]));
  return results[0].finish(file);
}

// Parses text in parts when it is big enough and written one event per line,
// else (or after any error in a part) as one part.
TraceModel read_text(std::string_view text, const std::string& file, const ProgressFn& progress,
                     const TraceParts& parts) {
  ParseProgress shared;
  shared.total_bytes = std::max<std::int64_t>(1, static_cast<std::int64_t>(text.size()));
  shared.report = &progress;
  report_progress(progress, 0, 1, "bytes read");
  std::optional<TraceModel> model = parse_in_parts(text, file, &shared, parts);
  if (!model) {
    // One part: small files, traces not written one event per line, and any
    // file with an error (so its message has the right line and event index).
    shared.parsed_bytes = 0;
    const std::vector<Piece> whole = {{text.data(), text.data() + text.size()}};
    model = parse_part(whole, file, &shared, true).finish(file);
  }
  if (progress) progress(1, 1, "bytes read");
  return std::move(*model);
}

}  // namespace

TraceModel read_trace_file(const std::string& path, const ProgressFn& progress) {
  return read_trace_file(path, progress, TraceParts{});
}

TraceModel read_trace_file(const std::string& path, const ProgressFn& progress, const TraceParts& parts) {
  const MappedFile mapped(path);
  return read_text(mapped.text(), path, progress, parts);
}

TraceModel read_trace_text(const std::string& text, const std::string& file_label) {
  ParseProgress shared;
  const std::vector<Piece> whole = {{text.data(), text.data() + text.size()}};
  return parse_part(whole, file_label, &shared, true).finish(file_label);
}

TraceModel read_trace_text(const std::string& text, const std::string& file_label, const TraceParts& parts) {
  return read_text(text, file_label, {}, parts);
}

}  // namespace strata::gui
