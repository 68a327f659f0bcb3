#include "gui/model/trace_reader.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <streambuf>
#include <vector>

#include "core/error.h"
#include "core/json_reader.h"

namespace strata::gui {
namespace {

using Json = nlohmann::json;

constexpr std::size_t kChunkBytes = std::size_t{4} << 20;  // 4 MiB: few syscalls, small memory

// A read-only streambuf over a FILE*, refilled in chunks; reports progress and
// honours cancellation between chunks (returning end-of-file stops the parser).
class ChunkedFileBuf : public std::streambuf {
 public:
  ChunkedFileBuf(std::FILE* f, std::int64_t size_bytes, const ProgressFn& progress)
      : file_(f), size_bytes_(size_bytes), progress_(progress), buffer_(kChunkBytes) {}

  bool cancelled() const { return cancelled_; }
  bool read_failed() const { return read_failed_; }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    if (progress_ && size_bytes_ > 0 &&
        !progress_(
            std::min(1.0, static_cast<double>(read_bytes_) / static_cast<double>(size_bytes_)))) {
      cancelled_ = true;
      return traits_type::eof();
    }
    const std::size_t n = std::fread(buffer_.data(), 1, buffer_.size(), file_);
    if (n == 0) {
      read_failed_ = std::ferror(file_) != 0;
      return traits_type::eof();
    }
    read_bytes_ += static_cast<std::int64_t>(n);
    setg(buffer_.data(), buffer_.data(), buffer_.data() + n);
    return traits_type::to_int_type(*gptr());
  }

 private:
  std::FILE* file_;
  std::int64_t size_bytes_;
  std::int64_t read_bytes_ = 0;
  const ProgressFn& progress_;
  std::vector<char> buffer_;
  bool cancelled_ = false;
  bool read_failed_ = false;
};

// Which value the parser is reading inside an event.
enum class Field : std::uint8_t {
  kIgnored,
  kPh,
  kName,
  kCat,
  kPid,
  kTid,
  kTs,
  kDur,
  kArgs,
};
enum class ArgField : std::uint8_t {
  kIgnored,
  kMb,
  kLayer,
  kChunk,
  kPhase,
  kFlops,
  kBytes,
  kName,
  kSortIndex,
};

Field field_of(const std::string& k) {
  switch (k.size()) {
    case 2:
      if (k == "ph") return Field::kPh;
      if (k == "ts") return Field::kTs;
      break;
    case 3:
      if (k == "cat") return Field::kCat;
      if (k == "pid") return Field::kPid;
      if (k == "tid") return Field::kTid;
      if (k == "dur") return Field::kDur;
      break;
    case 4:
      if (k == "name") return Field::kName;
      if (k == "args") return Field::kArgs;
      break;
    default:
      break;
  }
  return Field::kIgnored;
}

ArgField arg_field_of(const std::string& k) {
  if (k == "mb") return ArgField::kMb;
  if (k == "layer") return ArgField::kLayer;
  if (k == "chunk") return ArgField::kChunk;
  if (k == "phase") return ArgField::kPhase;
  if (k == "flops") return ArgField::kFlops;
  if (k == "bytes") return ArgField::kBytes;
  if (k == "name") return ArgField::kName;
  if (k == "sort_index") return ArgField::kSortIndex;
  return ArgField::kIgnored;
}

// One event as read, before it becomes a span or metadata.
struct PendingEvent {
  char ph = 0;
  bool has_pid = false, has_tid = false, has_ts = false, has_dur = false, has_cat = false;
  bool cat_known = false;
  std::string name;
  std::string cat;
  std::int64_t pid = 0, tid = 0;
  double ts_us = 0.0, dur_us = 0.0;
  Category category = Category::kGemm;
  SpanDetail detail;
  std::string phase;
  std::string arg_name;
  std::int64_t sort_index = 0;
  bool has_sort_index = false;

  void reset() { *this = PendingEvent(); }
};

// The SAX handler: events of traceEvents go straight into the builder; every other
// top-level value (otherData and anything else) is built as a small DOM.
class TraceSax {
 public:
  explicit TraceSax(std::string file) : file_(std::move(file)) {}

  // nlohmann::json SAX interface.
  bool null() { return scalar(Json()); }
  bool boolean(bool v) { return scalar(Json(v)); }
  bool number_integer(Json::number_integer_t v) { return number(static_cast<double>(v), v, true); }
  bool number_unsigned(Json::number_unsigned_t v) {
    const auto clamped =
        v > static_cast<Json::number_unsigned_t>(std::numeric_limits<std::int64_t>::max())
            ? std::numeric_limits<std::int64_t>::max()
            : static_cast<std::int64_t>(v);
    return number(static_cast<double>(v), clamped, true);
  }
  bool number_float(Json::number_float_t v, const std::string&) { return number(v, 0, false); }
  bool string(std::string& v);
  bool binary(Json::binary_t&) { return fail("", "binary values are not JSON"); }
  bool start_object(std::size_t);
  bool key(std::string& k);
  bool end_object();
  bool start_array(std::size_t);
  bool end_array();
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) {
    parse_error_ = ex.what();
    return false;
  }

  const std::string& error_path() const { return error_path_; }
  const std::string& error_message() const { return error_message_; }
  const std::string& json_parse_error() const { return parse_error_; }
  bool saw_trace_events() const { return saw_trace_events_; }
  Json& other() { return other_; }
  TraceModelBuilder& builder() { return builder_; }

 private:
  enum class Where : std::uint8_t { kOutside, kTop, kEvents, kEvent, kArgs, kDom };

  bool fail(std::string path, std::string message) {
    error_path_ = std::move(path);
    error_message_ = std::move(message);
    return false;
  }
  std::string event_path(const char* key) const {
    return fmt::format("$.traceEvents[{}].{}", event_index_, key);
  }
  bool scalar(Json v);
  bool number(double v, std::int64_t i, bool integral);
  bool finish_event();
  // DOM building for the values outside traceEvents.
  bool dom_value(Json v);
  bool dom_open(Json container);
  bool dom_close();

  std::string file_;
  TraceModelBuilder builder_;
  Where where_ = Where::kOutside;
  int skip_depth_ = 0;  // nesting inside an ignored value of an event
  std::string top_key_;
  bool saw_trace_events_ = false;
  std::size_t event_index_ = 0;
  Field field_ = Field::kIgnored;
  ArgField arg_field_ = ArgField::kIgnored;
  PendingEvent ev_;
  Json other_ = Json::object();
  std::vector<Json*> dom_stack_;
  std::string dom_key_;
  std::string error_path_, error_message_, parse_error_;
};

bool TraceSax::start_object(std::size_t) {
  if (skip_depth_ > 0) return ++skip_depth_, true;
  switch (where_) {
    case Where::kOutside:
      where_ = Where::kTop;
      return true;
    case Where::kTop:
      return dom_open(Json::object());
    case Where::kEvents:
      where_ = Where::kEvent;
      ev_.reset();
      return true;
    case Where::kEvent:
      if (field_ == Field::kArgs) {
        where_ = Where::kArgs;
        return true;
      }
      skip_depth_ = 1;
      return true;
    case Where::kArgs:
      skip_depth_ = 1;
      return true;
    case Where::kDom:
      return dom_open(Json::object());
  }
  return true;
}

bool TraceSax::start_array(std::size_t) {
  if (skip_depth_ > 0) return ++skip_depth_, true;
  switch (where_) {
    case Where::kOutside:
      return fail("$",
                  "expected the JSON object form of the Chrome trace "
                  "format ({\"traceEvents\": [...]}), got an array");
    case Where::kTop:
      if (top_key_ == "traceEvents") {
        where_ = Where::kEvents;
        saw_trace_events_ = true;
        return true;
      }
      return dom_open(Json::array());
    case Where::kEvents:
      return fail(fmt::format("$.traceEvents[{}]", event_index_), "expected an event object");
    case Where::kEvent:
    case Where::kArgs:
      skip_depth_ = 1;
      return true;
    case Where::kDom:
      return dom_open(Json::array());
  }
  return true;
}

bool TraceSax::end_object() {
  if (skip_depth_ > 0) return --skip_depth_, true;
  switch (where_) {
    case Where::kArgs:
      where_ = Where::kEvent;
      return true;
    case Where::kEvent:
      where_ = Where::kEvents;
      if (!finish_event()) return false;
      ++event_index_;
      return true;
    case Where::kDom:
      return dom_close();
    case Where::kTop:
      where_ = Where::kOutside;
      return true;
    default:
      return true;
  }
}

bool TraceSax::end_array() {
  if (skip_depth_ > 0) return --skip_depth_, true;
  if (where_ == Where::kEvents) {
    where_ = Where::kTop;
    return true;
  }
  if (where_ == Where::kDom) return dom_close();
  return true;
}

bool TraceSax::key(std::string& k) {
  if (skip_depth_ > 0) return true;
  switch (where_) {
    case Where::kTop:
      top_key_ = k;
      return true;
    case Where::kEvent:
      field_ = field_of(k);
      return true;
    case Where::kArgs:
      arg_field_ = arg_field_of(k);
      return true;
    case Where::kDom:
      dom_key_ = k;
      return true;
    default:
      return true;
  }
}

bool TraceSax::string(std::string& v) {
  if (skip_depth_ > 0) return true;
  if (where_ == Where::kEvent) {
    switch (field_) {
      case Field::kPh:
        ev_.ph = v.size() == 1 ? v[0] : '?';
        break;
      case Field::kName:
        ev_.name = v;
        break;
      case Field::kCat:
        ev_.has_cat = true;
        ev_.cat_known = parse_category(v, &ev_.category);
        if (!ev_.cat_known) ev_.cat = v;
        break;
      case Field::kPid:
      case Field::kTid:
      case Field::kTs:
      case Field::kDur:
        return fail(event_path(field_ == Field::kPid   ? "pid"
                               : field_ == Field::kTid ? "tid"
                               : field_ == Field::kTs  ? "ts"
                                                       : "dur"),
                    "expected a number, got a string (\"" + v + "\")");
      default:
        break;
    }
    return true;
  }
  if (where_ == Where::kArgs) {
    if (arg_field_ == ArgField::kPhase) ev_.phase = v;
    if (arg_field_ == ArgField::kName) ev_.arg_name = v;
    return true;
  }
  return scalar(Json(v));
}

bool TraceSax::number(double v, std::int64_t i, bool integral) {
  if (skip_depth_ > 0) return true;
  if (where_ == Where::kEvent) {
    switch (field_) {
      case Field::kPid:
      case Field::kTid:
        if (!integral || i < 0 || i > std::numeric_limits<std::int32_t>::max()) {
          return fail(event_path(field_ == Field::kPid ? "pid" : "tid"),
                      fmt::format("expected an integer in [0, 2147483647], got {}", v));
        }
        (field_ == Field::kPid ? ev_.pid : ev_.tid) = i;
        (field_ == Field::kPid ? ev_.has_pid : ev_.has_tid) = true;
        break;
      case Field::kTs:
        ev_.ts_us = v;
        ev_.has_ts = true;
        break;
      case Field::kDur:
        ev_.dur_us = v;
        ev_.has_dur = true;
        break;
      default:
        break;
    }
    return true;
  }
  if (where_ == Where::kArgs) {
    switch (arg_field_) {
      case ArgField::kMb:
        ev_.detail.mb = static_cast<std::int32_t>(v);
        break;
      case ArgField::kLayer:
        ev_.detail.layer = static_cast<std::int32_t>(v);
        break;
      case ArgField::kChunk:
        ev_.detail.chunk = static_cast<std::int16_t>(v);
        break;
      case ArgField::kFlops:
        ev_.detail.flops = v;
        break;
      case ArgField::kBytes:
        ev_.detail.bytes = v;
        break;
      case ArgField::kSortIndex:
        ev_.sort_index = integral ? i : static_cast<std::int64_t>(v);
        ev_.has_sort_index = true;
        break;
      default:
        break;
    }
    return true;
  }
  return scalar(integral ? Json(i) : Json(v));
}

bool TraceSax::scalar(Json v) {
  if (skip_depth_ > 0 || where_ == Where::kEvent || where_ == Where::kArgs) return true;
  if (where_ == Where::kOutside) return fail("$", "expected a JSON object with \"traceEvents\"");
  if (where_ == Where::kEvents) {
    return fail(fmt::format("$.traceEvents[{}]", event_index_), "expected an event object");
  }
  return dom_value(std::move(v));
}

bool TraceSax::finish_event() {
  if (ev_.ph == 'M') {
    if (!ev_.has_pid) return true;
    const int pid = static_cast<int>(ev_.pid);
    if (ev_.name == "process_name" && !ev_.arg_name.empty()) {
      builder_.set_process_label(pid, ev_.arg_name);
    } else if (ev_.name == "process_sort_index" && ev_.has_sort_index) {
      builder_.set_process_sort_index(pid, static_cast<int>(ev_.sort_index));
    } else if (ev_.name == "thread_name" && ev_.has_tid && !ev_.arg_name.empty()) {
      builder_.set_stream_label(pid, static_cast<int>(ev_.tid), ev_.arg_name);
    }
    return true;
  }
  if (ev_.ph != 'X') return true;
  if (!ev_.has_pid) return fail(event_path("pid"), "a complete (\"X\") event needs a pid (rank)");
  if (!ev_.has_tid) return fail(event_path("tid"), "a complete (\"X\") event needs a tid (stream)");
  if (!ev_.has_ts) return fail(event_path("ts"), "a complete (\"X\") event needs ts (µs)");
  if (!ev_.has_dur) return fail(event_path("dur"), "a complete (\"X\") event needs dur (µs)");
  if (!(ev_.dur_us >= 0.0) || !std::isfinite(ev_.ts_us) || !std::isfinite(ev_.dur_us)) {
    return fail(event_path("dur"),
                fmt::format("expected a finite duration ≥ 0 µs, got {}", ev_.dur_us));
  }
  if (!ev_.has_cat || !ev_.cat_known) {
    return fail(event_path("cat"),
                fmt::format("{}; allowed: gemm, attention, elementwise, tp, pp, dp, zero, "
                            "optimizer, copy",
                            ev_.has_cat ? "unknown category \"" + ev_.cat + "\""
                                        : std::string("missing category")));
  }
  Phase phase = Phase::kNone;
  if (!ev_.phase.empty() && !parse_phase(ev_.phase, &phase)) {
    return fail(event_path("args.phase"),
                "unknown phase \"" + ev_.phase + "\"; allowed: fwd, bwd, recompute, step");
  }
  ev_.detail.phase = phase;
  ev_.detail.name = builder_.intern(ev_.name);
  // ts and dur are microseconds with three decimals: nanoseconds, rounded.
  const auto start_ns = static_cast<TimeNs>(std::llround(ev_.ts_us * 1e3));
  const auto dur_ns = static_cast<TimeNs>(std::llround(ev_.dur_us * 1e3));
  builder_.add_span(static_cast<int>(ev_.pid), static_cast<int>(ev_.tid), start_ns, dur_ns,
                    ev_.category, ev_.detail);
  return true;
}

bool TraceSax::dom_value(Json v) {
  if (dom_stack_.empty()) {
    other_[top_key_] = std::move(v);
    return true;
  }
  Json& top = *dom_stack_.back();
  if (top.is_array()) {
    top.push_back(std::move(v));
  } else {
    top[dom_key_] = std::move(v);
  }
  return true;
}

bool TraceSax::dom_open(Json container) {
  Json* slot = nullptr;
  if (dom_stack_.empty()) {
    slot = &(other_[top_key_] = std::move(container));
  } else if (dom_stack_.back()->is_array()) {
    dom_stack_.back()->push_back(std::move(container));
    slot = &dom_stack_.back()->back();
  } else {
    slot = &((*dom_stack_.back())[dom_key_] = std::move(container));
  }
  dom_stack_.push_back(slot);
  where_ = Where::kDom;
  return true;
}

bool TraceSax::dom_close() {
  dom_stack_.pop_back();
  if (dom_stack_.empty()) where_ = Where::kTop;
  return true;
}

// "[json.exception.parse_error.101] parse error at line 3, column 7: syntax error ..."
// becomes "file:3:7" and "malformed JSON: syntax error ...", as core/json_reader does.
[[noreturn]] void throw_parse_error(const std::string& file, const std::string& what) {
  std::size_t line = 0, column = 0;
  const auto at = what.find("at line ");
  if (at != std::string::npos) {
    std::sscanf(what.c_str() + at, "at line %zu, column %zu", &line, &column);
  }
  const auto colon = what.rfind(": ");
  const std::string reason = colon == std::string::npos ? what : what.substr(colon + 2);
  const std::string where = line > 0 ? fmt::format("{}:{}:{}", file, line, column) : file;
  throw InputError(where, "", "malformed JSON: " + reason);
}

// Reads otherData.strata into the model's header fields (types checked, unknown
// keys allowed: newer writers may add some).
TraceModel header_from(Json& other, const std::string& file) {
  TraceModel m;
  m.file = file;
  auto od = other.find("otherData");
  if (od == other.end() || !od->is_object()) return m;
  auto st = od->find("strata");
  if (st == od->end()) return m;
  json::ObjectReader r(*st, file, "$.otherData.strata");
  m.kind = r.choice_or("kind", "", {"predicted", "measured"});
  m.model_name = r.string_or("model", "");
  if (r.has("plan")) m.plan = r.raw("plan");
  m.step_time_s = r.number_or("step_time_s", 0.0, 0.0, 1e9);
  m.num_ranks = static_cast<int>(r.integer_or("num_ranks", 0, 0, 100000000));
  return m;
}

TraceModel finish(TraceSax& sax, bool ok, const std::string& file) {
  if (!ok) {
    if (!sax.error_message().empty()) throw InputError(file, sax.error_path(), sax.error_message());
    throw_parse_error(file, sax.json_parse_error());
  }
  if (!sax.saw_trace_events()) {
    throw InputError(file, "$.traceEvents",
                     "missing: a trace is a JSON object with a \"traceEvents\" array "
                     "(docs/formats.md, \"trace.json\")");
  }
  return sax.builder().finalize(header_from(sax.other(), file));
}

}  // namespace

TraceModel read_trace_file(const std::string& path, const ProgressFn& progress) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f)
    throw InputError(path, "",
                     std::string("cannot open file for reading: ") + std::strerror(errno));
  std::fseek(f.get(), 0, SEEK_END);
  const std::int64_t size_bytes = std::ftell(f.get());
  std::fseek(f.get(), 0, SEEK_SET);
  ChunkedFileBuf buf(f.get(), size_bytes, progress);
  std::istream in(&buf);
  TraceSax sax(path);
  const bool ok = Json::sax_parse(in, &sax);
  if (buf.cancelled()) throw Cancelled();
  if (buf.read_failed()) throw InputError(path, "", "error while reading the file");
  TraceModel m = finish(sax, ok, path);
  if (progress) progress(1.0);
  return m;
}

TraceModel read_trace_text(const std::string& text, const std::string& file_label) {
  TraceSax sax(file_label);
  const bool ok = Json::sax_parse(text, &sax);
  return finish(sax, ok, file_label);
}

}  // namespace strata::gui
