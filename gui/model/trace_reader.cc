#include "gui/model/trace_reader.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/json_reader.h"

namespace strata::gui {
namespace {

using Json = nlohmann::json;

// Progress is reported, and cancellation checked, every this many bytes parsed.
constexpr std::ptrdiff_t kCheckpointBytes = std::ptrdiff_t{4} << 20;
// Files from this size are parsed by several threads (when the machine has them).
constexpr std::size_t kParallelMinBytes = std::size_t{32} << 20;
// Each thread gets at least this much of the file.
constexpr std::size_t kMinPartBytes = std::size_t{16} << 20;
// The most threads one file is parsed by.
constexpr unsigned kMaxThreads = 8;

// How far the parse of a file has come, shared by the threads parsing its parts.
struct ParseProgress {
  std::atomic<std::int64_t> parsed_bytes{0};
  std::atomic<bool> cancelled{false};
  std::int64_t total_bytes = 1;
  const ProgressFn* report = nullptr;  // called from the thread parsing part 0 only
};

// A JSON text made of a few pieces of memory (a part of the file with a prefix
// and suffix that make it a complete trace), walked without copying. Every
// kCheckpointBytes it reports progress; after cancellation it ends early, which
// the parser sees as the end of the input.
struct Piece {
  const char* begin;
  const char* end;
};

class PieceIterator {
 public:
  using iterator_category = std::forward_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  PieceIterator() = default;  // the end
  PieceIterator(const std::vector<Piece>* pieces, ParseProgress* progress, bool reports)
      : pieces_(pieces), progress_(progress), reports_(reports) {
    enter(0);
    last_checkpoint_ = p_;
  }

  char operator*() const { return *p_; }
  PieceIterator& operator++() {
    if (++p_ == stop_) on_stop();
    return *this;
  }
  PieceIterator operator++(int) {
    PieceIterator before = *this;
    ++*this;
    return before;
  }
  bool operator==(const PieceIterator& o) const { return p_ == o.p_; }
  bool operator!=(const PieceIterator& o) const { return p_ != o.p_; }

 private:
  // Positions at the start of piece i (skipping empty ones), or at the end.
  void enter(std::size_t i) {
    while (i < pieces_->size() && (*pieces_)[i].begin == (*pieces_)[i].end) ++i;
    piece_ = i;
    if (i == pieces_->size()) {
      p_ = nullptr;
      return;
    }
    p_ = (*pieces_)[i].begin;
    set_stop();
  }
  void set_stop() {
    const char* end = (*pieces_)[piece_].end;
    stop_ = end - p_ > kCheckpointBytes ? p_ + kCheckpointBytes : end;
  }
  void on_stop() {
    if (progress_ != nullptr) {
      const std::int64_t done =
          progress_->parsed_bytes.fetch_add(p_ - last_checkpoint_) + (p_ - last_checkpoint_);
      last_checkpoint_ = p_;
      if (reports_ && progress_->report != nullptr && *progress_->report &&
          !(*progress_->report)(std::min(done, progress_->total_bytes), progress_->total_bytes, "bytes read")) {
        progress_->cancelled = true;
      }
      if (progress_->cancelled) {
        p_ = nullptr;
        return;
      }
    }
    if (p_ == (*pieces_)[piece_].end) {
      enter(piece_ + 1);
      last_checkpoint_ = p_;
    } else {
      set_stop();
    }
  }

  const std::vector<Piece>* pieces_ = nullptr;
  ParseProgress* progress_ = nullptr;
  bool reports_ = false;
  std::size_t piece_ = 0;
  const char* p_ = nullptr;
  const char* stop_ = nullptr;
  const char* last_checkpoint_ = nullptr;
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

// Key lookups run for every key of every event: string_view literals compare
// length first and inline the memcmp (std::string == const char* calls strlen).
using namespace std::string_view_literals;

Field field_of(std::string_view k) {
  switch (k.size()) {
    case 2:
      if (k == "ph"sv) return Field::kPh;
      if (k == "ts"sv) return Field::kTs;
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
  bool cat_known = false, phase_known = true, has_sort_index = false;
  Meta meta = Meta::kNone;
  std::int64_t pid = 0, tid = 0;
  double ts_us = 0.0, dur_us = 0.0;
  Category category = Category::kGemm;
  SpanDetail detail;
  std::int64_t sort_index = 0;
  std::string bad_category, bad_phase;  // unknown names, for the error message
  std::string arg_name;                 // args.name of metadata events

  void reset() {
    ph = 0;
    has_pid = has_tid = has_ts = has_dur = has_cat = cat_known = has_sort_index = false;
    phase_known = true;
    meta = Meta::kNone;
    pid = tid = 0;
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
    if (ev_.meta == Meta::kProcessName && !ev_.arg_name.empty()) {
      builder_.set_process_label(pid, ev_.arg_name);
    } else if (ev_.meta == Meta::kProcessSortIndex && ev_.has_sort_index) {
      builder_.set_process_sort_index(pid, static_cast<int>(ev_.sort_index));
    } else if (ev_.meta == Meta::kThreadName && ev_.has_tid && !ev_.arg_name.empty()) {
      builder_.set_stream_label(pid, static_cast<int>(ev_.tid), ev_.arg_name);
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
                fmt::format("{}; allowed: gemm, attention, elementwise, tp, pp, dp, zero, "
                            "optimizer, copy",
                            ev_.has_cat ? "unknown category \"" + ev_.bad_category + "\""
                                        : std::string("missing category")));
  }
  if (!ev_.phase_known) {
    return fail(event_path("args.phase"),
                "unknown phase \"" + ev_.bad_phase + "\"; allowed: fwd, bwd, recompute, step");
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

// The file mapped into memory, read-only: no copy and no zero-filled buffer
// (reading 180 MB into a std::string cost more than a third of the parse).
class MappedFile {
 public:
  // Throws InputError naming path when it cannot be opened or mapped.
  explicit MappedFile(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      throw InputError(path, "",
                       std::string("cannot open file for reading: ") + std::strerror(errno));
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      throw InputError(path, "", "not a regular file");
    }
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
      if (p == MAP_FAILED) {
        ::close(fd);
        throw InputError(path, "", std::string("cannot map the file: ") + std::strerror(errno));
      }
      ::madvise(p, size_, MADV_SEQUENTIAL);
      data_ = static_cast<const char*>(p);
    }
    ::close(fd);
  }
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<char*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::string_view text() const { return data_ != nullptr ? std::string_view(data_, size_) : ""; }

 private:
  const char* data_ = nullptr;
  std::size_t size_ = 0;
};

// One part of a trace, parsed.
struct PartResult {
  std::unique_ptr<TraceSax> sax;
  bool ok = false;
  bool cancelled = false;

  TraceModel finish(const std::string& file) {
    if (cancelled) throw Cancelled();
    return finish_model(*sax, ok, file);
  }
};

// About how many bytes one task takes in a trace (sim/trace_writer's lines are
// 150-200 bytes): sizes the span table up front.
constexpr std::size_t kBytesPerTaskEstimate = 170;

PartResult parse_part(const std::vector<Piece>& pieces, const std::string& file,
                      ParseProgress* shared, bool reports) {
  PartResult r;
  r.sax = std::make_unique<TraceSax>(file);
  std::size_t bytes = 0;
  for (const Piece& p : pieces) bytes += static_cast<std::size_t>(p.end - p.begin);
  r.sax->builder().reserve(bytes / kBytesPerTaskEstimate);
  r.ok = Json::sax_parse(PieceIterator(&pieces, shared, reports), PieceIterator(), r.sax.get());
  r.cancelled = shared->cancelled;
  return r;
}

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
                                         ParseProgress* shared) {
  static constexpr char kOpen[] = "{\"traceEvents\":[";
  static constexpr char kClose[] = "]}";
  const unsigned threads = std::min(kMaxThreads, std::thread::hardware_concurrency());
  if (text.size() < kParallelMinBytes || threads < 2) return std::nullopt;
  if (events_start(text) == std::string::npos) return std::nullopt;
  const std::size_t parts = std::min<std::size_t>(threads, text.size() / kMinPartBytes);
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
  std::vector<PartResult> results(starts.size());
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
  for (const PartResult& r : results) {
    if (!r.ok || !r.sax->saw_trace_events()) return std::nullopt;
  }
  TraceSax& first = *results[0].sax;
  for (std::size_t k = 1; k < results.size(); ++k) {
    first.builder().append(std::move(results[k].sax->builder()));
    for (auto& [key, value] : results[k].sax->other().items()) first.other()[key] = value;
  }
  return first.builder().finalize(header_from(first.other(), file));
}
}  // namespace

TraceModel read_trace_file(const std::string& path, const ProgressFn& progress) {
  const MappedFile mapped(path);
  const std::string_view text = mapped.text();
  ParseProgress shared;
  shared.total_bytes = std::max<std::int64_t>(1, static_cast<std::int64_t>(text.size()));
  shared.report = &progress;
  report_progress(progress, 0, 1, "bytes read");
  std::optional<TraceModel> model = parse_in_parts(text, path, &shared);
  if (!model) {
    // One part: small files, traces not written one event per line, and any
    // file with an error (so its message has the right line and event index).
    shared.parsed_bytes = 0;
    const std::vector<Piece> whole = {{text.data(), text.data() + text.size()}};
    model = parse_part(whole, path, &shared, true).finish(path);
  }
  if (progress) progress(1, 1, "bytes read");
  return std::move(*model);
}

TraceModel read_trace_text(const std::string& text, const std::string& file_label) {
  ParseProgress shared;
  const std::vector<Piece> whole = {{text.data(), text.data() + text.size()}};
  return parse_part(whole, file_label, &shared, true).finish(file_label);
}

}  // namespace strata::gui
