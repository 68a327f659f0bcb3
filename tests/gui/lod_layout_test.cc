// Level-of-detail merging (how many marks a lane becomes at a zoom) and the
// row layout with nodes folding, on lanes built in code and the fixture trace.
#include <QTest>
#include <random>

#include "gui/model/lod.h"
#include "gui/model/span_text.h"
#include "gui/model/timeline_layout.h"
#include "gui/model/trace_reader.h"
#include "gui_test_support.h"

namespace strata::gui {
namespace {

// A lane of n tasks of dur_ns each, one every period_ns from 0; categories
// cycle through `categories`.
Lane make_lane(int n, TimeNs dur_ns, TimeNs period_ns,
               std::vector<Category> categories = {Category::kGemm}) {
  TraceModelBuilder b;
  SpanDetail d;
  d.name = b.intern("task");
  for (int i = 0; i < n; ++i) {
    b.add_span(0, 0, i * period_ns, dur_ns, categories[i % categories.size()], d);
  }
  return std::move(b.finalize(TraceModel()).lanes.front());
}

// The level of detail written the plain way, one task at a time (the rule in
// gui/model/lod.h), to check the block shortcut against.
std::vector<Mark> reference_marks(const Lane& lane, const TimeView& view, double min_px) {
  std::vector<Mark> out;
  const double px_per_ns = 1.0 / view.ns_per_px();
  bool open = false;
  Mark run;
  std::array<double, kNumCategories> run_ns{};
  auto close = [&] {
    if (!open) return;
    const auto longest = std::max_element(run_ns.begin(), run_ns.end());
    if (run.count > 1 && *longest > 0.0)
      run.category = static_cast<Category>(longest - run_ns.begin());
    run.busy_ns = 0.0;
    for (double ns : run_ns) run.busy_ns += ns;
    out.push_back(run);
    open = false;
  };
  for (std::size_t i = 0; i < lane.spans.size(); ++i) {
    const Span& s = lane.spans[i];
    if (s.start_ns >= view.end_ns()) break;
    if (s.end_ns() <= view.start_ns() && s.dur_ns > 0) continue;
    const double x0 = (s.start_ns - view.start_ns()) * px_per_ns;
    const double x1 = (s.end_ns() - view.start_ns()) * px_per_ns;
    if (x1 - x0 >= min_px) {
      close();
      out.push_back(Mark{x0, x1, 1, static_cast<std::uint32_t>(i), s.category, static_cast<double>(s.dur_ns)});
    } else if (open && x0 - run.x1_px < min_px && lane.group[i] == lane.group[run.first_span]) {
      run.x1_px = std::max(run.x1_px, x1);
      ++run.count;
      run_ns[static_cast<int>(s.category)] += s.dur_ns;
    } else {
      close();
      open = true;
      run = Mark{x0, x1, 1, static_cast<std::uint32_t>(i), s.category};
      run_ns.fill(0.0);
      run_ns[static_cast<int>(s.category)] = s.dur_ns;
    }
  }
  close();
  return out;
}

std::vector<Mark> marks_of(const Lane& lane, double start, double end, int width) {
  std::vector<Mark> out;
  build_marks(lane, TimeView(start, end, width), kMergeBelowPx, &out);
  return out;
}

}  // namespace

class LodLayoutTest : public QObject {
  Q_OBJECT

 private slots:
  void merge_counts_data() {
    QTest::addColumn<int>("n");
    QTest::addColumn<qint64>("dur");
    QTest::addColumn<qint64>("period");
    QTest::addColumn<double>("start");
    QTest::addColumn<double>("end");
    QTest::addColumn<int>("width");
    QTest::addColumn<int>("marks");
    QTest::addColumn<int>("first_count");
    // 1000 back-to-back 10 ns tasks at 100 ns/px: 0.1 px each, no gaps -> one mark.
    QTest::newRow("all merge") << 1000 << qint64(10) << qint64(10) << 0.0 << 10000.0 << 100 << 1
                               << 1000;
    // At 3 ns/px each task is 3.33 px: drawn one by one; 30 start before 300 ns.
    QTest::newRow("all single") << 1000 << qint64(10) << qint64(10) << 0.0 << 300.0 << 100 << 30
                                << 1;
    // 10 ns tasks every 1000 ns at 100 ns/px: 0.1 px wide, 9.9 px apart (>= 3 px): 100 marks.
    QTest::newRow("gaps keep narrow tasks apart")
        << 1000 << qint64(10) << qint64(1000) << 0.0 << 100000.0 << 1000 << 100 << 1;
    // Every 200 ns: gaps of 1.9 px (< 3 px) merge the 500 tasks that start in view.
    QTest::newRow("small gaps merge")
        << 1000 << qint64(10) << qint64(200) << 0.0 << 100000.0 << 1000 << 1 << 500;
    // A window in the middle at 1 ns/px: tasks 500..599 are visible, 10 px each.
    QTest::newRow("visible range only")
        << 1000 << qint64(10) << qint64(10) << 5000.0 << 6000.0 << 1000 << 100 << 1;
    // Tasks exactly 3 px wide are not merged (narrower than 3 px merge).
    QTest::newRow("3 px is wide enough")
        << 100 << qint64(30) << qint64(30) << 0.0 << 1000.0 << 100 << 34 << 1;
  }
  void merge_counts() {
    QFETCH(int, n);
    QFETCH(qint64, dur);
    QFETCH(qint64, period);
    QFETCH(double, start);
    QFETCH(double, end);
    QFETCH(int, width);
    QFETCH(int, marks);
    QFETCH(int, first_count);
    const Lane lane = make_lane(n, dur, period);
    const auto m = marks_of(lane, start, end, width);
    QCOMPARE(static_cast<int>(m.size()), marks);
    QCOMPARE(static_cast<int>(m.front().count), first_count);
    // Every visible task is in exactly one mark.
    std::uint32_t total = 0;
    for (const Mark& mark : m) total += mark.count;
    std::uint32_t visible = 0;
    for (const Span& s : lane.spans) {
      if (s.start_ns < end && s.end_ns() > start) ++visible;
    }
    QCOMPARE(total, visible);
  }

  void blocks_merge_exactly_like_one_by_one() {
    // 20,000 tasks of 1 ns to 5 us with gaps of 0 to 3 us, mixed categories, at
    // zooms from the whole lane to a few tasks, at several offsets: the block
    // shortcut must give exactly the marks of the one-by-one rule.
    std::mt19937_64 rng(7);
    std::uniform_int_distribution<TimeNs> dur(1, 5000), gap(0, 3000);
    std::uniform_int_distribution<int> cat(0, kNumCategories - 1);
    TraceModelBuilder b;
    SpanDetail d;
    TimeNs t = 0;
    for (int i = 0; i < 20000; ++i) {
      const TimeNs ns = dur(rng);
      // A new micro-batch every 150 tasks, forward then backward: step blocks
      // that start inside the shortcut's 64-task blocks.
      d.mb = i / 150;
      d.phase = (i / 150) % 2 ? Phase::kBwd : Phase::kFwd;
      b.add_span(0, 0, t, ns, static_cast<Category>(cat(rng)), d);
      t += ns + (i % 500 < 250 ? 0 : gap(rng));  // stretches without gaps, then gappy ones
    }
    const Lane lane = std::move(b.finalize(TraceModel()).lanes.front());
    QVERIFY(lane.blocks.size() == 20000 / kLodBlockSpans);
    int views = 0;
    for (double span = static_cast<double>(t); span > 1000.0; span /= 3.7) {
      for (double offset : {-0.1, 0.0, 0.37, 0.9}) {
        const TimeView view(offset * t, offset * t + span, 1000);
        std::vector<Mark> fast;
        build_marks(lane, view, kMergeBelowPx, &fast);
        const std::vector<Mark> slow = reference_marks(lane, view, kMergeBelowPx);
        QCOMPARE(fast.size(), slow.size());
        for (std::size_t m = 0; m < fast.size(); ++m) {
          QCOMPARE(fast[m].count, slow[m].count);
          QCOMPARE(fast[m].first_span, slow[m].first_span);
          QCOMPARE(fast[m].category, slow[m].category);
          QCOMPARE(fast[m].x0_px, slow[m].x0_px);
          QCOMPARE(fast[m].x1_px, slow[m].x1_px);
          // Block sums add in another order: equal to rounding.
          QVERIFY(std::abs(fast[m].busy_ns - slow[m].busy_ns) <= 1e-9 * slow[m].busy_ns);
        }
        ++views;
      }
    }
    QVERIFY(views > 20);
  }

  // Tiny tasks of two micro-batches back to back: at a zoom that merges them all,
  // still one mark per micro-batch (the pipeline schedule at any zoom).
  void a_new_step_block_splits_a_run() {
    TraceModelBuilder b;
    SpanDetail d;
    d.name = b.intern("fc1");
    for (int i = 0; i < 400; ++i) {
      d.mb = i / 200;
      d.phase = Phase::kFwd;
      b.add_span(0, 0, i * 10, 10, Category::kGemm, d);
    }
    const Lane lane = std::move(b.finalize(TraceModel()).lanes.front());
    QCOMPARE(lane.group.front(), 0u);
    QCOMPARE(lane.group.back(), 1u);
    const auto m = marks_of(lane, 0.0, 4000.0, 10);  // 400 ns per px
    QCOMPARE(m.size(), std::size_t{2});
    QCOMPARE(m[0].count, 200u);
    QCOMPARE(m[1].first_span, 200u);
  }

  void first_visible_mark_names_its_task() {
    const Lane lane = make_lane(1000, 10, 10);
    const auto m = marks_of(lane, 5000.0, 6000.0, 1000);
    QCOMPARE(m.front().first_span, 500u);
    QCOMPARE(m.front().x0_px, 0.0);
    QCOMPARE(m.front().x1_px, 10.0);
  }

  void a_wide_task_splits_a_run() {
    // 5 narrow tasks (10 ns), one wide (1000 ns), 5 narrow, back to back, at 100 ns/px.
    TraceModelBuilder b;
    SpanDetail d;
    TimeNs t = 0;
    for (int i = 0; i < 11; ++i) {
      const TimeNs dur = i == 5 ? 1000 : 10;
      b.add_span(0, 0, t, dur, i == 5 ? Category::kTp : Category::kGemm, d);
      t += dur;
    }
    const Lane lane = std::move(b.finalize(TraceModel()).lanes.front());
    const auto m = marks_of(lane, 0.0, 10000.0, 100);
    QCOMPARE(m.size(), std::size_t{3});
    QCOMPARE(m[0].count, 5u);
    QCOMPARE(m[1].count, 1u);
    QCOMPARE(m[1].category, Category::kTp);
    QCOMPARE(m[1].x1_px - m[1].x0_px, 10.0);
    QCOMPARE(m[2].count, 5u);
  }

  // A merged mark knows how busy the lane is under it: 100 tasks of 10 ns every
  // 40 ns are a quarter busy; one task alone is as busy as it is wide.
  void merged_mark_knows_its_busy_share() {
    const Lane lane = make_lane(100, 10, 40);
    const TimeView view(0.0, 4000.0, 100);  // 40 ns per px: every task merges
    const auto m = marks_of(lane, 0.0, 4000.0, 100);
    QCOMPARE(m.size(), std::size_t{1});
    QCOMPARE(m[0].busy_ns, 1000.0);
    // The run spans 0 to 3970 ns (the last task's end).
    QVERIFY(std::abs(busy_share(m[0], view) - 1000.0 / 3970.0) < 1e-12);
    const auto single = marks_of(lane, 0.0, 40.0, 100);
    QCOMPARE(single.front().count, 1u);
    QCOMPARE(busy_share(single.front(), TimeView(0.0, 40.0, 100)), 1.0);
  }

  void merged_mark_takes_the_longest_category() {
    // Alternating 10 ns gemm and 20 ns tp tasks (period 30 ns via two lanes of work):
    // tp holds 2/3 of the time, so the merged mark is tp-colored.
    TraceModelBuilder b;
    SpanDetail d;
    for (int i = 0; i < 100; ++i) {
      b.add_span(0, 0, i * 30, 10, Category::kGemm, d);
      b.add_span(0, 0, i * 30 + 10, 20, Category::kTp, d);
    }
    const Lane lane = std::move(b.finalize(TraceModel()).lanes.front());
    const auto m = marks_of(lane, 0.0, 3000.0, 10);
    QCOMPARE(m.size(), std::size_t{1});
    QCOMPARE(m[0].count, 200u);
    QCOMPARE(m[0].category, Category::kTp);
  }

  void a_long_task_stays_visible_when_zoomed_into_its_middle() {
    // The optimizer step [0, 1 ms) followed by 1000 short tasks: zooming into
    // [500, 600] us must still find the long task (it starts long before the view).
    TraceModelBuilder b;
    SpanDetail d;
    b.add_span(0, 0, 0, 1000000, Category::kOptimizer, d);
    for (int i = 0; i < 1000; ++i) b.add_span(0, 0, 1000 + i * 1000, 10, Category::kGemm, d);
    const Lane lane = std::move(b.finalize(TraceModel()).lanes.front());
    QCOMPARE(first_span_ending_after(lane, 500000), std::size_t{0});
    const auto m = marks_of(lane, 500000.0, 600000.0, 1000);
    QCOMPARE(m.front().category, Category::kOptimizer);
    QCOMPARE(m.front().x0_px, -5000.0);  // starts 500 us = 5000 px left of the view
    // Between the short tasks only the long one is under the cursor...
    QCOMPARE(span_at(lane, 550500, 0), std::int64_t{0});
    // ...and a short task under the cursor wins over the long one containing it.
    QCOMPARE(span_at(lane, 550005, 0), std::int64_t{550});
  }

  // A folded trace simulates one rank per stage, as pids 0, 1, ...; its lanes and
  // tooltips name the global ranks of the process names (rank 32 is stage 1's).
  void folded_lanes_are_named_by_global_rank() {
    const TraceModel trace = read_trace_text(
        R"json({"traceEvents":[
{"ph":"M","name":"process_name","pid":0,"args":{"name":"node 0 gpu 0 (rank 0: tp 0 dp 0 pp 0)"}},
{"ph":"M","name":"process_name","pid":1,"args":{"name":"node 4 gpu 0 (rank 32: tp 0 dp 0 pp 1)"}},
{"ph":"M","name":"thread_name","pid":1,"tid":0,"args":{"name":"compute"}},
{"ph":"X","name":"fc1","cat":"gemm","pid":0,"tid":0,"ts":0,"dur":5},
{"ph":"X","name":"fc1","cat":"gemm","pid":1,"tid":0,"ts":5,"dur":5}]})json",
        "folded.json");
    QCOMPARE(parse_rank_of_process("node 4 gpu 0 (rank 32: tp 0 dp 0 pp 1)"), 32);
    QCOMPARE(parse_rank_of_process("node 0 gpu 3 (rank 3)"), 3);
    QCOMPARE(parse_rank_of_process("rank 5"), -1);
    TimelineLayout layout;
    layout.set_traces({&trace});
    std::vector<std::string> labels;
    for (const auto& row : layout.rows()) {
      if (row.kind == RowKind::kLane) labels.push_back(row.label);
    }
    QCOMPARE(labels, (std::vector<std::string>{"rank 0 compute", "rank 32 compute"}));
    const Lane& stage1 = trace.lanes[1];
    QCOMPARE(stage1.rank, 1);
    QVERIFY(span_description(trace, stage1, stage1.spans[0]).find("rank 32 · compute") != std::string::npos);
  }

  // The simulator's exposed lane (thread 8) sits under its rank's compute lane,
  // and longest_span finds the headline link's target on it.
  void exposed_lane_follows_compute_and_its_longest_interval_is_found() {
    const TraceModel trace = read_trace_text(
        R"json({"traceEvents":[
{"ph":"M","name":"process_name","pid":0,"args":{"name":"node 0 gpu 0 (rank 0)"}},
{"ph":"M","name":"process_name","pid":1,"args":{"name":"node 0 gpu 1 (rank 1)"}},
{"ph":"M","name":"thread_name","pid":0,"tid":8,"args":{"name":"exposed"}},
{"ph":"M","name":"thread_name","pid":1,"tid":8,"args":{"name":"exposed"}},
{"ph":"X","name":"fc1","cat":"gemm","pid":0,"tid":0,"ts":0,"dur":5},
{"ph":"X","name":"all_reduce","cat":"tp","pid":0,"tid":1,"ts":5,"dur":3},
{"ph":"X","name":"exposed tp","cat":"tp","pid":0,"tid":8,"ts":5,"dur":3},
{"ph":"X","name":"bubble","cat":"bubble","pid":0,"tid":8,"ts":8,"dur":4},
{"ph":"X","name":"fc1","cat":"gemm","pid":1,"tid":0,"ts":0,"dur":5},
{"ph":"X","name":"exposed tp","cat":"tp","pid":1,"tid":8,"ts":6,"dur":4},
{"ph":"X","name":"exposed tp","cat":"tp","pid":1,"tid":8,"ts":12,"dur":2}]})json",
        "exposed.json");
    std::vector<std::string> labels;
    for (const Lane& lane : trace.lanes) labels.push_back(std::to_string(lane.rank) + " " + lane.stream_label);
    QCOMPARE(labels, (std::vector<std::string>{"0 compute", "0 exposed", "0 tp-comm", "1 compute", "1 exposed"}));
    // Rank 1's 4 us beats rank 0's 3 us; the tp-comm lane's all_reduce is not a wait.
    QCOMPARE(longest_span(trace, "exposed", Category::kTp), (std::optional<SpanRef>{SpanRef{4, 0}}));
    QCOMPARE(longest_span(trace, "exposed", Category::kBubble), (std::optional<SpanRef>{SpanRef{1, 1}}));
    QVERIFY(!longest_span(trace, "exposed", Category::kDp).has_value());
    QCOMPARE(trace.lanes[4].spans[0].dur_ns, TimeNs{4000});
  }

  // Flow ends bind to the slice enclosing their time (Chrome's binding rule, as
  // Perfetto applies it); ends without a partner or a slice are dropped.
  void flows_bind_to_their_enclosing_slices() {
    const TraceModel trace = read_trace_text(
        R"json({"traceEvents":[
{"ph":"X","name":"send","cat":"pp","pid":0,"tid":3,"ts":5,"dur":3},
{"ph":"X","name":"send","cat":"pp","pid":0,"tid":3,"ts":10,"dur":0},
{"ph":"X","name":"send","cat":"pp","pid":1,"tid":4,"ts":5,"dur":3},
{"ph":"X","name":"send","cat":"pp","pid":1,"tid":4,"ts":10,"dur":2},
{"ph":"s","id":7,"name":"send","cat":"pp","pid":0,"tid":3,"ts":6},
{"ph":"f","bp":"e","id":7,"name":"send","cat":"pp","pid":1,"tid":4,"ts":5},
{"ph":"s","id":8,"name":"send","cat":"pp","pid":0,"tid":3,"ts":10},
{"ph":"f","bp":"e","id":8,"name":"send","cat":"pp","pid":1,"tid":4,"ts":11.5},
{"ph":"s","id":9,"name":"send","cat":"pp","pid":0,"tid":3,"ts":9},
{"ph":"f","bp":"e","id":9,"name":"send","cat":"pp","pid":1,"tid":4,"ts":6},
{"ph":"s","id":10,"name":"send","cat":"pp","pid":0,"tid":3,"ts":5},
{"ph":"f","bp":"e","id":11,"name":"send","cat":"pp","pid":1,"tid":4,"ts":5}]})json",
        "flows.json");
    // Lanes: 0 = rank 0 pp-send, 1 = rank 1 pp-recv. Flow 9 starts in a gap (9 us),
    // flows 10 and 11 have no partner.
    QCOMPARE(trace.flows, (std::vector<Flow>{{SpanRef{0, 0}, SpanRef{1, 0}}, {SpanRef{0, 1}, SpanRef{1, 1}}}));
    QCOMPARE(trace.flows_of(SpanRef{1, 1}), (std::vector<Flow>{{SpanRef{0, 1}, SpanRef{1, 1}}}));
    QVERIFY(trace.flows_of(SpanRef{0, 2}).empty());
  }

  // Counter events ("C") become one track per rank and name, in time order, the
  // last of equal times holding; the layout puts a rank's counters under its lanes.
  void counters_become_tracks_under_their_rank() {
    const TraceModel trace = read_trace_text(
        R"json({"traceEvents":[
{"ph":"M","name":"process_name","pid":0,"args":{"name":"node 0 gpu 0 (rank 0)"}},
{"ph":"M","name":"process_name","pid":1,"args":{"name":"node 0 gpu 1 (rank 1)"}},
{"ph":"X","name":"fc1","cat":"gemm","pid":0,"tid":0,"ts":0,"dur":5},
{"ph":"X","name":"ar","cat":"tp","pid":0,"tid":1,"ts":5,"dur":5},
{"ph":"X","name":"fc1","cat":"gemm","pid":1,"tid":0,"ts":0,"dur":5},
{"ph":"C","name":"memory","pid":1,"ts":0,"args":{"bytes":100}},
{"ph":"C","name":"memory","pid":0,"ts":4,"args":{"bytes":300}},
{"ph":"C","name":"memory","pid":0,"ts":0,"args":{"bytes":100}},
{"ph":"C","name":"memory","pid":0,"ts":4,"args":{"bytes":250}},
{"ph":"C","name":"memory","pid":0,"ts":9,"args":{"bytes":120}},
{"ph":"M","name":"process_name","pid":2,"args":{"name":"busiest links"}},
{"ph":"C","name":"n0.nic0 → leaf0 (ib)","pid":2,"ts":0,"args":{"utilization":0.25}}],
"otherData":{"strata":{"kind":"predicted","memory_capacity_bytes":1000}}})json",
        "counters.json");
    QCOMPARE(trace.counters.size(), std::size_t{3});
    QVERIFY(trace.counters[2].is_share());
    QCOMPARE(trace.counters[2].process_label, std::string("busiest links"));
    const CounterTrack& c0 = trace.counters[0];
    QCOMPARE(c0.rank, 0);
    QCOMPARE(c0.name, std::string("memory"));
    QVERIFY(c0.is_bytes());
    QCOMPARE(c0.t_ns, (std::vector<TimeNs>{0, 4000, 9000}));
    QCOMPARE(c0.value, (std::vector<double>{100, 250, 120}));  // 250 written after 300 at 4 us
    QCOMPARE(c0.max_value, 250.0);  // of the values that hold (300 was replaced at once)
    QCOMPARE(c0.value_at(5000), 250.0);
    QCOMPARE(c0.value_at(-1), 0.0);
    QCOMPARE(trace.memory_capacity_bytes, 1000.0);
    TimelineLayout layout;
    layout.set_traces({&trace});
    std::vector<std::string> labels;
    for (const auto& row : layout.rows()) {
      if (row.kind != RowKind::kTrace) labels.push_back(row.label);
    }
    // The links' process has no lanes: its counters come last, under its own header.
    QCOMPARE(labels, (std::vector<std::string>{"node 0 · 2 ranks", "rank 0 compute", "rank 0 tp-comm", "rank 0 memory",
                                               "rank 1 compute", "rank 1 memory", "busiest links",
                                               "n0.nic0 → leaf0 (ib)"}));
    // Its header folds it like a node.
    layout.toggle(0, counter_group_node(2));
    QCOMPARE(layout.rows().back().label, std::string("busiest links"));
  }

  void layout_rows_and_folding() {
    const TraceModel trace = read_trace_file(testing::data_file("trace_small.json"));
    TimelineLayout layout;
    layout.set_traces({&trace});
    // trace header; node 0 header, 2 lanes; node 1 header, 2 lanes.
    const auto& rows = layout.rows();
    QCOMPARE(rows.size(), std::size_t{7});
    QCOMPARE(rows[0].kind, RowKind::kTrace);
    QCOMPARE(rows[1].kind, RowKind::kNode);
    QCOMPARE(rows[1].label, std::string("node 0 · 1 rank"));
    QCOMPARE(rows[2].label, std::string("rank 0 compute"));
    QCOMPARE(rows[3].label, std::string("rank 0 pp-send"));
    QCOMPARE(rows[6].label, std::string("rank 1 dp-comm"));
    QCOMPARE(layout.total_height_px(), 3 * kHeaderHeightPx + 4 * kLaneHeightPx);
    QCOMPARE(layout.row_at(0), 0);
    QCOMPARE(layout.row_at(kHeaderHeightPx - 1), 0);
    QCOMPARE(layout.row_at(kHeaderHeightPx), 1);
    QCOMPARE(layout.row_at(layout.total_height_px() - 1), 6);
    QCOMPARE(layout.row_at(layout.total_height_px()), -1);
    // Taller lanes (headers keep their height), clamped to the allowed range.
    layout.set_lane_height(30);
    QCOMPARE(layout.total_height_px(), 3 * kHeaderHeightPx + 4 * 30);
    QCOMPARE(layout.counter_height(), 60);
    layout.set_lane_height(3);
    QCOMPARE(layout.lane_height(), kMinLaneHeightPx);
    layout.set_lane_height(kLaneHeightPx);

    layout.toggle(0, 0);
    QCOMPARE(layout.rows().size(), std::size_t{5});
    QVERIFY(layout.rows()[1].collapsed);
    // The folded node draws its ranks' compute lanes in its header row.
    QCOMPARE(layout.rows()[1].overlay_lanes, std::vector<int>{0});
    QCOMPARE(layout.rows()[2].label, std::string("node 1 · 1 rank"));
    layout.toggle(0, 0);
    QCOMPARE(layout.rows().size(), std::size_t{7});
  }

  void big_traces_open_folded() {
    // 64 ranks on 8 nodes, one lane each: more than kCollapseAboveLanes lanes.
    TraceModelBuilder b;
    SpanDetail d;
    for (int r = 0; r < 64; ++r) {
      b.set_process_label(r, "node " + std::to_string(r / 8) + " gpu " + std::to_string(r % 8) +
                                 " (rank " + std::to_string(r) + ")");
      b.add_span(r, 0, 0, 10, Category::kGemm, d);
    }
    const TraceModel trace = b.finalize(TraceModel());
    TimelineLayout layout;
    layout.set_traces({&trace});
    QCOMPARE(layout.rows().size(), std::size_t{1 + 8});
    QCOMPARE(layout.rows()[1].overlay_lanes.size(), std::size_t{8});
    QCOMPARE(layout.rows()[8].label, std::string("node 7 · 8 ranks"));
  }
};

int run_lod_layout_tests(int argc, char** argv) { return testing::run<LodLayoutTest>(argc, argv); }

}  // namespace strata::gui

#include "lod_layout_test.moc"
