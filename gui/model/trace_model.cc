#include "gui/model/trace_model.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <numeric>
#include <tuple>

namespace strata::gui {

const char* to_string(Phase p) {
  switch (p) {
    case Phase::kNone: return "";
    case Phase::kFwd: return to_string(trace::Phase::kForward);
    case Phase::kBwd: return to_string(trace::Phase::kBackward);
    case Phase::kRecompute: return to_string(trace::Phase::kRecompute);
    case Phase::kStep: return to_string(trace::Phase::kStep);
    case Phase::kWgrad: return to_string(trace::Phase::kWeightGrad);
  }
  return "";
}

bool parse_phase(std::string_view s, Phase* out) {
  trace::Phase p;
  if (!trace::parse_phase(s, &p)) return false;
  switch (p) {
    case trace::Phase::kForward: *out = Phase::kFwd; break;
    case trace::Phase::kBackward: *out = Phase::kBwd; break;
    case trace::Phase::kRecompute: *out = Phase::kRecompute; break;
    case trace::Phase::kStep: *out = Phase::kStep; break;
    case trace::Phase::kWeightGrad: *out = Phase::kWgrad; break;
  }
  return true;
}

std::string stream_name(int tid) {
  if (tid >= 0 && tid < trace::kNumLanes) return to_string(static_cast<trace::Lane>(tid));
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
  auto it = name_index_.find(name);
  if (it != name_index_.end()) return it->second;
  auto index = static_cast<std::uint32_t>(names_.size());
  names_.emplace_back(name);
  name_index_.emplace(std::string(name), index);
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

void TraceModelBuilder::add_flow_end(std::int64_t id, bool start, int rank, int stream, TimeNs ts_ns) {
  flow_ends_.push_back(FlowEnd{id, start, rank, stream, ts_ns});
}

void TraceModelBuilder::add_counter_point(int rank, std::uint32_t name, std::uint32_t series, TimeNs ts_ns,
                                          double value) {
  counter_points_.push_back(CounterPoint{rank, name, series, ts_ns, value});
}

double CounterTrack::value_at(TimeNs t) const {
  const auto it = std::upper_bound(t_ns.begin(), t_ns.end(), t);
  return it == t_ns.begin() ? 0.0 : value[static_cast<std::size_t>(it - t_ns.begin()) - 1];
}

void TraceModelBuilder::append(TraceModelBuilder&& other) {
  std::vector<std::uint32_t> name_map(other.names_.size());
  for (std::size_t i = 0; i < other.names_.size(); ++i) name_map[i] = intern(other.names_[i]);
  const auto offset = static_cast<std::uint32_t>(details_.size());
  details_.reserve(details_.size() + other.details_.size());
  for (SpanDetail d : other.details_) {
    d.name = name_map[d.name];
    details_.push_back(d);
  }
  for (Lane& lane : other.lanes_) {
    auto [it, inserted] = lane_of_.try_emplace(key(lane.rank, lane.stream), lanes_.size());
    if (inserted) {
      Lane fresh;
      fresh.rank = lane.rank;
      fresh.stream = lane.stream;
      lanes_.push_back(std::move(fresh));
    }
    std::vector<Span>& spans = lanes_[it->second].spans;
    spans.reserve(spans.size() + lane.spans.size());
    for (Span s : lane.spans) {
      s.detail += offset;
      spans.push_back(s);
    }
  }
  for (auto& [rank, label] : other.process_labels_) process_labels_.try_emplace(rank, label);
  for (auto& [rank, index] : other.sort_indices_) sort_indices_.try_emplace(rank, index);
  for (auto& [k, label] : other.stream_labels_) stream_labels_.try_emplace(k, label);
  flow_ends_.insert(flow_ends_.end(), other.flow_ends_.begin(), other.flow_ends_.end());
  for (CounterPoint c : other.counter_points_) {
    c.name = name_map[c.name];
    c.series = name_map[c.series];
    counter_points_.push_back(c);
  }
  last_key_ = ~0ull;
  other = TraceModelBuilder();
}

void TraceModelBuilder::reserve(std::size_t spans) { details_.reserve(spans); }

TraceModel TraceModelBuilder::finalize(TraceModel header) {
  for (Lane& lane : lanes_) {
    auto label = process_labels_.find(lane.rank);
    lane.process_label =
        label != process_labels_.end() ? label->second : "rank " + std::to_string(lane.rank);
    lane.node = parse_node_of_process(lane.process_label);
    const int global = parse_rank_of_process(lane.process_label);
    lane.global_rank = global >= 0 ? global : lane.rank;
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
    lane.group.resize(lane.spans.size());
    for (std::size_t k = 0; k < lane.spans.size(); ++k) {
      const SpanDetail& d = details_[lane.spans[k].detail];
      has_chunks_ = has_chunks_ || d.chunk > 0;
      if (k == 0) {
        lane.group[k] = 0;
        continue;
      }
      const SpanDetail& before = details_[lane.spans[k - 1].detail];
      const bool same = d.phase == before.phase && d.mb == before.mb && d.chunk == before.chunk;
      lane.group[k] = lane.group[k - 1] + (same ? 0 : 1);
    }
    lane.blocks.assign(lane.spans.size() / kLodBlockSpans, LodBlock());
    for (std::size_t i = 0; i < lane.blocks.size() * kLodBlockSpans; ++i) {
      LodBlock& b = lane.blocks[i / kLodBlockSpans];
      const Span& sp = lane.spans[i];
      b.max_dur_ns = std::max(b.max_dur_ns, sp.dur_ns);
      if (i > 0) b.max_gap_ns = std::max(b.max_gap_ns, sp.start_ns - lane.max_end_ns[i - 1]);
      b.category_ns[static_cast<int>(sp.category)] += static_cast<double>(sp.dur_ns);
    }
  }
  // The simulator's exposed lane sits under the compute lane whose idle time it
  // explains (its thread id comes after the streams').
  auto order = [](const Lane& l) {
    return l.stream_label == trace::kExposedLaneName ? std::pair{0, 1} : std::pair{l.stream, 0};
  };
  std::sort(lanes_.begin(), lanes_.end(), [&](const Lane& a, const Lane& b) {
    if (a.sort_index != b.sort_index) return a.sort_index < b.sort_index;
    if (a.rank != b.rank) return a.rank < b.rank;
    return order(a) < order(b);
  });
  header.flows = bind_flows();
  // Counters: points grouped by (rank, name), in time order (stable: the file's
  // order among equal times, the last one holding).
  std::stable_sort(counter_points_.begin(), counter_points_.end(), [&](const CounterPoint& a, const CounterPoint& b) {
    return std::make_tuple(a.rank, std::string_view(names_[a.name]), a.ts_ns) <
           std::make_tuple(b.rank, std::string_view(names_[b.name]), b.ts_ns);
  });
  for (const CounterPoint& c : counter_points_) {
    if (header.counters.empty() || header.counters.back().rank != c.rank ||
        header.counters.back().name != names_[c.name]) {
      CounterTrack track;
      track.rank = c.rank;
      track.name = names_[c.name];
      track.series = names_[c.series];
      auto label = process_labels_.find(c.rank);
      track.process_label = label != process_labels_.end() ? label->second : "rank " + std::to_string(c.rank);
      header.counters.push_back(std::move(track));
    }
    CounterTrack& track = header.counters.back();
    if (!track.t_ns.empty() && track.t_ns.back() == c.ts_ns) {
      track.value.back() = c.value;
    } else {
      track.t_ns.push_back(c.ts_ns);
      track.value.push_back(c.value);
    }
  }
  for (CounterTrack& track : header.counters) {
    track.max_value = *std::max_element(track.value.begin(), track.value.end());  // of the values that hold
  }
  header.has_chunks = has_chunks_;
  header.lanes = std::move(lanes_);
  header.details = std::move(details_);
  header.names = std::move(names_);
  *this = TraceModelBuilder();
  return header;
}

std::vector<Flow> TraceModelBuilder::bind_flows() const {
  std::unordered_map<std::uint64_t, int> lane_index;
  for (int l = 0; l < static_cast<int>(lanes_.size()); ++l) lane_index[key(lanes_[l].rank, lanes_[l].stream)] = l;
  // The slice enclosing ts: the last one starting at or before it that has not
  // ended (a zero-length slice encloses its own start).
  auto enclosing = [&](const FlowEnd& e) -> std::optional<SpanRef> {
    auto it = lane_index.find(key(e.rank, e.stream));
    if (it == lane_index.end()) return std::nullopt;
    const std::vector<Span>& spans = lanes_[it->second].spans;
    auto after = std::upper_bound(spans.begin(), spans.end(), e.ts_ns,
                                  [](TimeNs t, const Span& s) { return t < s.start_ns; });
    while (after != spans.begin()) {
      --after;
      if (after->end_ns() > e.ts_ns || after->start_ns == e.ts_ns) {
        return SpanRef{it->second, static_cast<std::int64_t>(after - spans.begin())};
      }
      if (after->start_ns < e.ts_ns) break;
    }
    return std::nullopt;
  };
  std::vector<FlowEnd> ends = flow_ends_;
  // By id, each id's start before its finish (stable: deterministic with reused ids).
  std::stable_sort(ends.begin(), ends.end(), [](const FlowEnd& a, const FlowEnd& b) {
    return std::make_pair(a.id, !a.start) < std::make_pair(b.id, !b.start);
  });
  std::vector<Flow> flows;
  for (std::size_t i = 0; i + 1 < ends.size(); ++i) {
    if (ends[i].id != ends[i + 1].id || !ends[i].start || ends[i + 1].start) continue;
    const auto from = enclosing(ends[i]);
    const auto to = enclosing(ends[i + 1]);
    if (from && to) flows.push_back(Flow{*from, *to});
    ++i;
  }
  std::sort(flows.begin(), flows.end(),
            [](const Flow& a, const Flow& b) { return std::tie(a.from, a.to) < std::tie(b.from, b.to); });
  return flows;
}

std::vector<Flow> TraceModel::flows_of(SpanRef span) const {
  std::vector<Flow> out;
  for (const Flow& f : flows) {
    if (f.from == span || f.to == span) out.push_back(f);
  }
  return out;
}

std::optional<SpanRef> longest_span(const TraceModel& trace, std::string_view stream_label, Category category) {
  std::optional<SpanRef> best;
  TimeNs best_dur = -1;
  for (int l = 0; l < static_cast<int>(trace.lanes.size()); ++l) {
    const Lane& lane = trace.lanes[l];
    if (lane.stream_label != stream_label) continue;
    for (std::size_t i = 0; i < lane.spans.size(); ++i) {
      const Span& s = lane.spans[i];
      if (s.category == category && s.dur_ns > best_dur) {
        best_dur = s.dur_ns;
        best = SpanRef{l, static_cast<std::int64_t>(i)};
      }
    }
  }
  return best;
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

int parse_rank_of_process(std::string_view label) {
  constexpr std::string_view kKey = "(rank ";
  const std::size_t at = label.find(kKey);
  if (at == std::string_view::npos) return -1;
  int rank = -1;
  const char* first = label.data() + at + kKey.size();
  const char* last = label.data() + label.size();
  auto [ptr, ec] = std::from_chars(first, last, rank);
  if (ec != std::errc() || ptr == first || rank < 0) return -1;
  return rank;
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
