#include "gui/model/trace_parser.h"

#include <fmt/format.h>

#include <cstdio>
#include <limits>
#include <string_view>

#include "core/error.h"
#include "core/json_reader.h"
#include "core/trace_vocabulary.h"

namespace strata::gui {
namespace {

using Json = nlohmann::json;

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
  kId,
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

// Key lookups run for every key of every event: string_view literals compare
// length first and inline the memcmp (std::string == const char* calls strlen).
using namespace std::string_view_literals;

Field field_of(std::string_view k) {
  switch (k.size()) {
    case 2:
      if (k == "ph"sv) return Field::kPh;
      if (k == "ts"sv) return Field::kTs;
      if (k == "id"sv) return Field::kId;
      break;
    case 3:
      if (k == "cat"sv) return Field::kCat;
      if (k == "pid"sv) return Field::kPid;
      if (k == "tid"sv) return Field::kTid;
      if (k == "dur"sv) return Field::kDur;
      break;
    case 4:
      if (k == "name"sv) return Field::kName;
      if (k == "args"sv) return Field::kArgs;
      break;
    default:
      break;
  }
  return Field::kIgnored;
}

ArgField arg_field_of(std::string_view k) {
  switch (k.size()) {
    case 2:
      if (k == "mb"sv) return ArgField::kMb;
      break;
    case 4:
      if (k == "name"sv) return ArgField::kName;
      break;
    case 5:
      if (k == "layer"sv) return ArgField::kLayer;
      if (k == "chunk"sv) return ArgField::kChunk;
      if (k == "phase"sv) return ArgField::kPhase;
      if (k == "flops"sv) return ArgField::kFlops;
      if (k == "bytes"sv) return ArgField::kBytes;
      break;
    case 10:
      if (k == "sort_index"sv) return ArgField::kSortIndex;
      break;
    default:
      break;
  }
  return ArgField::kIgnored;
}

// An event without a "name" key, until it is given "".
constexpr std::uint32_t kNoName = ~std::uint32_t{0};

// Metadata events the reader uses (docs/formats.md, "trace.json").
enum class Meta : std::uint8_t { kNone, kProcessName, kProcessSortIndex, kThreadName };

Meta meta_of(std::string_view name) {
  if (name == "process_name"sv) return Meta::kProcessName;
  if (name == "process_sort_index"sv) return Meta::kProcessSortIndex;
  if (name == "thread_name"sv) return Meta::kThreadName;
  return Meta::kNone;
}

// One event as read, before it becomes a span or metadata. Strings are parsed
// where they arrive (names interned, category and phase to enums), so a task
// costs no string copies.
struct PendingEvent {
  char ph = 0;
  bool has_pid = false, has_tid = false, has_ts = false, has_dur = false, has_cat = false;
  bool cat_known = false, phase_known = true, has_sort_index = false, has_id = false, has_arg_number = false;
  double arg_number = 0.0;  // the last number in args (a counter's value)
  std::string arg_key;      // a counter's series: the key of that number
  Meta meta = Meta::kNone;
  std::int64_t pid = 0, tid = 0, id = 0;
  double ts_us = 0.0, dur_us = 0.0;
  Category category = Category::kGemm;
  SpanDetail detail;
  std::int64_t sort_index = 0;
  std::string bad_category, bad_phase;  // unknown names, for the error message
  std::string arg_name;                 // args.name of metadata events

  void reset() {
    ph = 0;
    has_pid = has_tid = has_ts = has_dur = has_cat = cat_known = has_sort_index = has_id = has_arg_number = false;
    arg_number = 0.0;
    arg_key.clear();
    phase_known = true;
    meta = Meta::kNone;
    pid = tid = id = 0;
    ts_us = dur_us = 0.0;
    category = Category::kGemm;
    detail = SpanDetail();
    detail.name = kNoName;
    sort_index = 0;
    bad_category.clear();
    bad_phase.clear();
    arg_name.clear();
  }
};

}  // namespace

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
      if (ev_.ph == 'C') ev_.arg_key = k;  // a counter's series (the writer puts "ph" first)
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
        // Metadata names ("process_name", ...) are not task names: not interned.
        ev_.meta = meta_of(v);
        if (ev_.meta == Meta::kNone) ev_.detail.name = builder_.intern(v);
        break;
      case Field::kCat:
        ev_.has_cat = true;
        ev_.cat_known = parse_category(v, &ev_.category);
        if (!ev_.cat_known) ev_.bad_category = v;
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
    if (arg_field_ == ArgField::kPhase) {
      ev_.phase_known = parse_phase(v, &ev_.detail.phase);
      if (!ev_.phase_known) ev_.bad_phase = v;
    }
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
      case Field::kId:  // flows: an integer id (string ids, legal too, are not ours: ignored)
        if (integral) {
          ev_.id = i;
          ev_.has_id = true;
        }
        break;
      default:
        break;
    }
    return true;
  }
  if (where_ == Where::kArgs) {
    ev_.arg_number = v;
    ev_.has_arg_number = true;
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
    if (ev_.meta == Meta::kProcessName && !ev_.arg_name.empty()) {
      builder_.set_process_label(pid, ev_.arg_name);
    } else if (ev_.meta == Meta::kProcessSortIndex && ev_.has_sort_index) {
      builder_.set_process_sort_index(pid, static_cast<int>(ev_.sort_index));
    } else if (ev_.meta == Meta::kThreadName && ev_.has_tid && !ev_.arg_name.empty()) {
      builder_.set_stream_label(pid, static_cast<int>(ev_.tid), ev_.arg_name);
    }
    return true;
  }
  if (ev_.ph == 's' || ev_.ph == 'f') {
    // A flow's end: kept when complete (an arrow is decoration, not worth refusing a trace).
    if (ev_.has_id && ev_.has_pid && ev_.has_tid && ev_.has_ts && std::isfinite(ev_.ts_us)) {
      builder_.add_flow_end(ev_.id, ev_.ph == 's', static_cast<int>(ev_.pid), static_cast<int>(ev_.tid),
                            static_cast<TimeNs>(std::llround(ev_.ts_us * 1e3)));
    }
    return true;
  }
  if (ev_.ph == 'C') {
    // A counter's point: its name and its (one) value in args.
    if (ev_.has_pid && ev_.has_ts && ev_.has_arg_number && std::isfinite(ev_.ts_us) && ev_.detail.name != kNoName) {
      builder_.add_counter_point(static_cast<int>(ev_.pid), ev_.detail.name, builder_.intern(ev_.arg_key),
                                 static_cast<TimeNs>(std::llround(ev_.ts_us * 1e3)), ev_.arg_number);
    }
    return true;
  }
  if (ev_.ph != 'X') return true;
  // A task named like a metadata event (legal, if odd) gets its name now.
  if (ev_.meta == Meta::kProcessName) ev_.detail.name = builder_.intern("process_name");
  if (ev_.meta == Meta::kProcessSortIndex) {
    ev_.detail.name = builder_.intern("process_sort_index");
  }
  if (ev_.meta == Meta::kThreadName) ev_.detail.name = builder_.intern("thread_name");
  if (ev_.detail.name == kNoName) ev_.detail.name = builder_.intern("");
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
                fmt::format("{}; allowed: {}",
                            ev_.has_cat ? "unknown category \"" + ev_.bad_category + "\""
                                        : std::string("missing category"),
                            trace::category_names()));
  }
  if (!ev_.phase_known) {
    return fail(event_path("args.phase"),
                "unknown phase \"" + ev_.bad_phase + "\"; allowed: " + trace::phase_names());
  }
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

namespace {

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
  m.memory_capacity_bytes = r.number_or("memory_capacity_bytes", 0.0, 0.0, 1e18);
  return m;
}

TraceModel finish_model(TraceSax& sax, bool ok, const std::string& file) {
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

// About how many bytes one task takes in a trace (sim/trace_writer's lines are
// 150-200 bytes): sizes the span table up front.
constexpr std::size_t kBytesPerTaskEstimate = 170;

}  // namespace

ParsedPart::ParsedPart() = default;
ParsedPart::~ParsedPart() = default;
ParsedPart::ParsedPart(ParsedPart&&) noexcept = default;
ParsedPart& ParsedPart::operator=(ParsedPart&&) noexcept = default;

bool ParsedPart::complete() const { return ok_ && sax_ != nullptr && sax_->saw_trace_events(); }

TraceModel ParsedPart::finish(const std::string& file) {
  if (cancelled_) throw Cancelled();
  return finish_model(*sax_, ok_, file);
}

void ParsedPart::append(ParsedPart&& later) {
  sax_->builder().append(std::move(later.sax_->builder()));
  for (auto& [key, value] : later.sax_->other().items()) sax_->other()[key] = value;
}

ParsedPart parse_part(const std::vector<trace_input::Piece>& pieces, const std::string& file,
                      trace_input::ParseProgress* shared, bool reports) {
  using trace_input::PieceIterator;
  ParsedPart r;
  r.sax_ = std::make_unique<TraceSax>(file);
  std::size_t bytes = 0;
  for (const trace_input::Piece& p : pieces) bytes += static_cast<std::size_t>(p.end - p.begin);
  r.sax_->builder().reserve(bytes / kBytesPerTaskEstimate);
  r.ok_ = Json::sax_parse(PieceIterator(&pieces, shared, reports), PieceIterator(), r.sax_.get());
  r.cancelled_ = shared->cancelled;
  return r;
}

}  // namespace strata::gui
