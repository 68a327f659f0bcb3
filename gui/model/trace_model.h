// The timeline of one trace.json, held compactly for drawing a million tasks.
//
// Invariants (after finalize()):
//   - lanes are ordered by (process sort index, rank, stream);
//   - each lane's spans are sorted by start_ns (ties by end), and
//     max_end_ns[i] is the largest end among spans[0..i] (non-decreasing), so the
//     first span that can reach a time t is a binary search away even when spans
//     overlap (measured traces) or one span is very long (the optimizer step);
//   - blocks[b] summarises spans[64b .. 64b+63] (whole blocks only) for the
//     level of detail, which merges a block of tiny tasks in one step;
//   - a Span is 24 bytes; its rarely needed fields (name, micro-batch, layer, ...)
//     live in the side table `details`, indexed by Span::detail.
// No Qt types: the maths is tested without a display.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/trace_vocabulary.h"
#include "core/units.h"

namespace strata::gui {

// Task categories of docs/formats.md ("trace.json", core/trace_vocabulary.h), in
// the order colors are assigned.
using Category = trace::Category;
using trace::kNumCategories;
using trace::parse_category;

enum class Phase : std::uint8_t { kNone, kFwd, kBwd, kRecompute, kStep, kWgrad };
inline constexpr int kNumPhases = 6;
const char* to_string(Phase p);
// The phase named s (core/trace_vocabulary.h: "fwd", "bwd", "recompute", "step");
// false otherwise.
bool parse_phase(std::string_view s, Phase* out);

// The name of stream tid as docs/formats.md numbers them (0 compute ... 5 copy);
// "stream N" for other numbers.
std::string stream_name(int tid);

struct Span {
  TimeNs start_ns = 0;
  TimeNs dur_ns = 0;
  std::uint32_t detail = 0;  // index into TraceModel::details
  Category category = Category::kGemm;

  TimeNs end_ns() const { return start_ns + dur_ns; }
};
static_assert(sizeof(Span) == 24, "spans are kept compact: a million of them is 24 MB");

// The side table of a span: what hovering and selection show.
struct SpanDetail {
  std::uint32_t name = 0;   // index into TraceModel::names
  std::int32_t mb = -1;     // micro-batch, -1 when none
  std::int32_t layer = -1;  // -1 when none
  std::int16_t chunk = 0;   // virtual pipeline stage
  Phase phase = Phase::kNone;
  double flops = 0.0;
  double bytes = 0.0;
};

// Spans per LodBlock.
inline constexpr std::size_t kLodBlockSpans = 64;

// What the level of detail needs to know of 64 consecutive spans to merge them
// without visiting each: the longest one, the widest gap before one (from the
// running maximum end), and the time per category.
struct LodBlock {
  TimeNs max_dur_ns = 0;
  TimeNs max_gap_ns = 0;  // max over the block of start - max_end of the span before (>= 0)
  std::array<double, kNumCategories> category_ns{};
};

// One (rank, stream) row of the timeline.
struct Lane {
  int rank = 0;               // Chrome trace pid
  int stream = 0;             // Chrome trace tid
  int node = -1;              // parsed from the process name "node N gpu G (rank R)"; -1 unknown
  // The rank as users name it: R of the process name (a folded trace simulates
  // ranks 0, 32, ... as pids 0, 1, ...), else the pid.
  int global_rank = 0;
  int sort_index = 0;         // process_sort_index, else the rank
  std::string process_label;  // "node 0 gpu 3 (rank 3)"
  std::string stream_label;   // "compute", "tp-comm", ...
  std::vector<Span> spans;
  std::vector<TimeNs> max_end_ns;  // running maximum of span ends (see invariants)
  std::vector<LodBlock> blocks;    // one per whole kLodBlockSpans spans
  // Per span, which step block it belongs to: consecutive spans of one
  // (phase, micro-batch, chunk) share a number, which grows by one at each change
  // (non-decreasing). The level of detail never merges across a change, so at any
  // zoom a compute lane shows the pipeline schedule: one mark per micro-batch,
  // chunk and phase.
  std::vector<std::uint32_t> group;
};

// A span of a trace: its lane index and its index in the lane.
struct SpanRef {
  int lane = 0;
  std::int64_t span = 0;
  bool operator==(const SpanRef&) const = default;
  auto operator<=>(const SpanRef&) const = default;
};

// A flow (Chrome trace "s" and "f" events with one id): an arrow from the slice
// enclosing the start to the slice enclosing the finish — a pipeline send to
// its receive on the next stage.
struct Flow {
  SpanRef from;
  SpanRef to;
  bool operator==(const Flow&) const = default;
};

// A counter (Chrome trace "C" events) of one rank: a value that holds from each
// time to the next — the simulator's "memory" (bytes per GPU over the step).
struct CounterTrack {
  int rank = 0;      // Chrome trace pid
  std::string name;  // "memory", "n0.nic0 → leaf0 (ib)"
  std::string series;  // the args key: "bytes", "utilization" (a share, 0..1)
  std::string process_label;  // its pid's process_name ("busiest links")
  std::vector<TimeNs> t_ns;
  std::vector<double> value;
  double max_value = 0.0;
  bool is_bytes() const { return series == "bytes"; }
  bool is_share() const { return series == "utilization"; }
  // The value at t (the last point at or before it); 0 before the first.
  double value_at(TimeNs t) const;
};

struct TraceModel {
  std::string file;          // where it was read from
  std::string kind;          // "predicted" | "measured" (otherData.strata.kind), "" if absent
  std::string model_name;    // otherData.strata.model
  nlohmann::json plan;       // otherData.strata.plan (null if absent)
  double step_time_s = 0.0;  // otherData.strata.step_time_s (0 if absent)
  int num_ranks = 0;         // otherData.strata.num_ranks (0 if absent)
  double memory_capacity_bytes = 0.0;  // otherData.strata.memory_capacity_bytes (0 if absent)
  std::vector<Lane> lanes;
  std::vector<SpanDetail> details;
  std::vector<std::string> names;  // interned task names
  std::vector<Flow> flows;         // sorted by (from, to)
  std::vector<CounterTrack> counters;  // by (rank, name)
  bool has_chunks = false;         // some task has chunk > 0 (an interleaved schedule)

  std::size_t num_spans() const;
  // Earliest start and latest end over all spans; {0, 0} when empty.
  TimeNs begin_ns() const;
  TimeNs end_ns() const;
  const std::string& name_of(const Span& s) const { return names[details[s.detail].name]; }
  const SpanDetail& detail_of(const Span& s) const { return details[s.detail]; }
  // Distinct node numbers of the lanes in order of first appearance (-1 for unknown).
  std::vector<int> nodes() const;
  // The flows that start or end at span (a send has one; a receive one).
  std::vector<Flow> flows_of(SpanRef span) const;
};

// Hashes std::string and std::string_view alike, so interning looks names up
// without building a std::string for each task.
struct NameHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};

// Builds a TraceModel one span at a time (the trace reader, tests, the benchmark).
class TraceModelBuilder {
 public:
  // Interns a task name; the index stays valid for the builder's life.
  std::uint32_t intern(std::string_view name);
  // Adds a span to lane (rank, stream), creating the lane on first use.
  void add_span(int rank, int stream, TimeNs start_ns, TimeNs dur_ns, Category category,
                const SpanDetail& detail);
  // Process metadata from "process_name" / "process_sort_index" events.
  void set_process_label(int rank, std::string label);
  void set_process_sort_index(int rank, int sort_index);
  void set_stream_label(int rank, int stream, std::string label);
  // One end of a flow ("s": start, else finish) on lane (rank, stream) at ts_ns;
  // finalize pairs the ends by id and binds each to the slice enclosing ts_ns.
  // Ends without a partner or an enclosing slice are dropped (Perfetto draws
  // nothing for them either).
  void add_flow_end(std::int64_t id, bool start, int rank, int stream, TimeNs ts_ns);
  // One point of counter `name` (an interned name) of rank, its series (interned) the args key.
  void add_counter_point(int rank, std::uint32_t name, std::uint32_t series, TimeNs ts_ns, double value);

  // Room for this many spans' details (the reader estimates it from the file size).
  void reserve(std::size_t spans);
  // Moves every span and label of other (a later part of the same trace) into
  // this builder, after this builder's spans in each lane; other is empty afterwards.
  void append(TraceModelBuilder&& other);

  // Sorts lanes and spans, computes max_end_ns and fills the lanes' labels and
  // nodes. The builder is empty afterwards.
  TraceModel finalize(TraceModel header);

 private:
  static std::uint64_t key(int rank, int stream) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(rank)) << 32) |
           static_cast<std::uint32_t>(stream);
  }
  std::vector<Lane> lanes_;
  std::unordered_map<std::uint64_t, std::size_t> lane_of_;
  std::vector<SpanDetail> details_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, std::uint32_t, NameHash, std::equal_to<>> name_index_;
  std::unordered_map<int, std::string> process_labels_;
  std::unordered_map<int, int> sort_indices_;
  std::unordered_map<std::uint64_t, std::string> stream_labels_;
  struct FlowEnd {
    std::int64_t id;
    bool start;
    int rank, stream;
    TimeNs ts_ns;
  };
  std::vector<FlowEnd> flow_ends_;
  struct CounterPoint {
    int rank;
    std::uint32_t name;
    std::uint32_t series;
    TimeNs ts_ns;
    double value;
  };
  std::vector<CounterPoint> counter_points_;
  bool has_chunks_ = false;
  // The flows of flow_ends_ on the finalized (sorted) lanes.
  std::vector<Flow> bind_flows() const;
  // Last lane used: consecutive events nearly always share a lane (sorted by pid, tid).
  std::uint64_t last_key_ = ~0ull;
  std::size_t last_lane_ = 0;
};

// The node number in a process name "node N gpu G (rank R)"; -1 when absent.
int parse_node_of_process(std::string_view label);
// The rank R in a process name "node N gpu G (rank R: …)" or "(rank R)"; -1 when absent.
int parse_rank_of_process(std::string_view label);

// The longest span of a category on the lanes named stream_label (the first of
// equals in lane order); nullopt when there is none. The headline's "exposed TP"
// jumps to longest_span(trace, "exposed", Category::kTp).
std::optional<SpanRef> longest_span(const TraceModel& trace, std::string_view stream_label, Category category);

// Index of the first span of lane that ends after t_ns (spans.size() if none).
std::size_t first_span_ending_after(const Lane& lane, TimeNs t_ns);

// The span of lane under time t_ns, widened by tolerance_ns on both sides (for
// picking narrow tasks with the mouse); among several, the one whose centre is
// closest to t_ns. Returns -1 when none.
std::int64_t span_at(const Lane& lane, TimeNs t_ns, TimeNs tolerance_ns);

}  // namespace strata::gui
