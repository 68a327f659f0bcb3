#include "gui/model/trace_model.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <numeric>

namespace strata::gui {

namespace {
constexpr const char* kCategoryNames[kNumCategories] = {
    "gemm", "attention", "elementwise", "tp", "pp", "dp", "zero", "optimizer", "copy"};
// docs/formats.md ("trace.json"): thread ids 0..5.
constexpr const char* kStreamNames[] = {"compute", "tp-comm", "dp-comm",
                                        "pp-send", "pp-recv", "copy"};
}  // namespace

const char* to_string(Category c) { return kCategoryNames[static_cast<int>(c)]; }

bool parse_category(std::string_view s, Category* out) {
  for (int i = 0; i < kNumCategories; ++i) {
    if (s == kCategoryNames[i]) {
      *out = static_cast<Category>(i);
      return true;
    }
  }
  return false;
}

const char* to_string(Phase p) {
  switch (p) {
    case Phase::kNone:
      return "";
    case Phase::kFwd:
      return "fwd";
    case Phase::kBwd:
      return "bwd";
    case Phase::kRecompute:
      return "recompute";
    case Phase::kStep:
      return "step";
  }
  return "";
}

bool parse_phase(std::string_view s, Phase* out) {
  for (Phase p : {Phase::kFwd, Phase::kBwd, Phase::kRecompute, Phase::kStep}) {
    if (s == to_string(p)) {
      *out = p;
      return true;
    }
  }
  return false;
}

std::string stream_name(int tid) {
  if (tid >= 0 && tid < static_cast<int>(std::size(kStreamNames))) return kStreamNames[tid];
  return "stream " + std::to_string(tid);
}

std::size_t TraceModel::num_spans() const {
  std::size_t n = 0;
  for (const Lane& l : lanes) n += l.spans.size();
  return n;
}

TimeNs TraceModel::begin_ns() const {
  TimeNs begin = std::numeric_limits<TimeNs>::max();
  for (const Lane& l : lanes) {
    if (!l.spans.empty()) begin = std::min(begin, l.spans.front().start_ns);
  }
  return begin == std::numeric_limits<TimeNs>::max() ? 0 : begin;
}

TimeNs TraceModel::end_ns() const {
  TimeNs end = 0;
  for (const Lane& l : lanes) {
    if (!l.max_end_ns.empty()) end = std::max(end, l.max_end_ns.back());
  }
  return end;
}

std::vector<int> TraceModel::nodes() const {
  std::vector<int> out;
  for (const Lane& l : lanes) {
    if (std::find(out.begin(), out.end(), l.node) == out.end()) out.push_back(l.node);
  }
  return out;
}

std::uint32_t TraceModelBuilder::intern(std::string_view name) {
  // Heterogeneous lookup needs C++20 transparent hashing on unordered_map, which
  // libstdc++ 12 lacks; task names are few and short, so a temporary is cheap.
  std::string key(name);
  auto it = name_index_.find(key);
  if (it != name_index_.end()) return it->second;
  auto index = static_cast<std::uint32_t>(names_.size());
  names_.push_back(key);
  name_index_.emplace(std::move(key), index);
  return index;
}

void TraceModelBuilder::add_span(int rank, int stream, TimeNs start_ns, TimeNs dur_ns,
                                 Category category, const SpanDetail& detail) {
  const std::uint64_t k = key(rank, stream);
  if (k != last_key_) {
    auto [it, inserted] = lane_of_.try_emplace(k, lanes_.size());
    if (inserted) {
      Lane lane;
      lane.rank = rank;
      lane.stream = stream;
      lanes_.push_back(std::move(lane));
    }
    last_key_ = k;
    last_lane_ = it->second;
  }
  Span s;
  s.start_ns = start_ns;
  s.dur_ns = dur_ns;
  s.detail = static_cast<std::uint32_t>(details_.size());
  s.category = category;
  details_.push_back(detail);
  lanes_[last_lane_].spans.push_back(s);
}

void TraceModelBuilder::set_process_label(int rank, std::string label) {
  process_labels_[rank] = std::move(label);
}

void TraceModelBuilder::set_process_sort_index(int rank, int sort_index) {
  sort_indices_[rank] = sort_index;
}

void TraceModelBuilder::set_stream_label(int rank, int stream, std::string label) {
  stream_labels_[key(rank, stream)] = std::move(label);
}

TraceModel TraceModelBuilder::finalize(TraceModel header) {
  for (Lane& lane : lanes_) {
    auto label = process_labels_.find(lane.rank);
    lane.process_label =
        label != process_labels_.end() ? label->second : "rank " + std::to_string(lane.rank);
    lane.node = parse_node_of_process(lane.process_label);
    auto sort = sort_indices_.find(lane.rank);
    lane.sort_index = sort != sort_indices_.end() ? sort->second : lane.rank;
    auto stream = stream_labels_.find(key(lane.rank, lane.stream));
    lane.stream_label = stream != stream_labels_.end() ? stream->second : stream_name(lane.stream);

    auto by_start = [](const Span& a, const Span& b) {
      return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.dur_ns < b.dur_ns;
    };
    // Traces are written sorted by (pid, tid, ts); sort only when one is not.
    if (!std::is_sorted(lane.spans.begin(), lane.spans.end(), by_start)) {
      std::stable_sort(lane.spans.begin(), lane.spans.end(), by_start);
    }
    lane.max_end_ns.resize(lane.spans.size());
    TimeNs running = std::numeric_limits<TimeNs>::min();
    for (std::size_t i = 0; i < lane.spans.size(); ++i) {
      running = std::max(running, lane.spans[i].end_ns());
      lane.max_end_ns[i] = running;
    }
  }
  std::sort(lanes_.begin(), lanes_.end(), [](const Lane& a, const Lane& b) {
    if (a.sort_index != b.sort_index) return a.sort_index < b.sort_index;
    if (a.rank != b.rank) return a.rank < b.rank;
    return a.stream < b.stream;
  });
  header.lanes = std::move(lanes_);
  header.details = std::move(details_);
  header.names = std::move(names_);
  *this = TraceModelBuilder();
  return header;
}

int parse_node_of_process(std::string_view label) {
  constexpr std::string_view kPrefix = "node ";
  if (label.substr(0, kPrefix.size()) != kPrefix) return -1;
  int node = -1;
  const char* first = label.data() + kPrefix.size();
  const char* last = label.data() + label.size();
  auto [ptr, ec] = std::from_chars(first, last, node);
  if (ec != std::errc() || ptr == first || node < 0) return -1;
  return node;
}

std::size_t first_span_ending_after(const Lane& lane, TimeNs t_ns) {
  auto it = std::upper_bound(lane.max_end_ns.begin(), lane.max_end_ns.end(), t_ns);
  return static_cast<std::size_t>(it - lane.max_end_ns.begin());
}

std::int64_t span_at(const Lane& lane, TimeNs t_ns, TimeNs tolerance_ns) {
  const TimeNs lo = t_ns - tolerance_ns;
  const TimeNs hi = t_ns + tolerance_ns;
  std::int64_t best = -1;
  double best_distance = std::numeric_limits<double>::infinity();
  for (std::size_t i = first_span_ending_after(lane, lo - 1);
       i < lane.spans.size() && lane.spans[i].start_ns <= hi; ++i) {
    const Span& s = lane.spans[i];
    if (s.end_ns() < lo) continue;
    // A span that contains t exactly wins over one only reached by the tolerance.
    const bool contains = s.start_ns <= t_ns && t_ns < s.end_ns();
    const double centre = static_cast<double>(s.start_ns) + 0.5 * static_cast<double>(s.dur_ns);
    const double distance = contains ? -1.0 / (1.0 + static_cast<double>(s.dur_ns))
                                     : std::abs(centre - static_cast<double>(t_ns));
    if (distance < best_distance) {
      best_distance = distance;
      best = static_cast<std::int64_t>(i);
    }
  }
  return best;
}

}  // namespace strata::gui
