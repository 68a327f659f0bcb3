// Find and the range summary on the fixture trace (tests/gui/data/trace_small.json):
// queries against the matches counted by hand, the range's figures against sums
// worked out from the fixture's events.
//
// The fixture, in us (pid tid name [start, end] mb phase):
//   0 0 fc1 [0,100] 0 fwd · fc1 [100,200] 1 fwd · fc1_bwd [400,600] 0 bwd ·
//       fc1_bwd [600,800] 1 bwd · adam [800,850] step
//   0 3 send_act [100,110] 0 fwd · send_act [200,210] 1 fwd
//   1 0 fc1 [110,210] 0 fwd · fc1 [210,310] 1 fwd · attn_bwd [310,355.5] 0 bwd ·
//       attn_bwd [355.5,400] 1 bwd
//   1 2 allreduce_grads [400,700.25] step
#include <QTest>

#include "core/error.h"
#include "gui/model/overview.h"
#include "gui/model/range_stats.h"
#include "gui/model/trace_reader.h"
#include "gui/model/trace_search.h"
#include "gui_test_support.h"

namespace strata::gui {
namespace {

// "lane:index" of each match, for readable comparisons.
std::vector<std::string> named(const TraceModel& t, const std::vector<SpanRef>& refs) {
  std::vector<std::string> out;
  for (const SpanRef& r : refs) {
    const Lane& lane = t.lanes[r.lane];
    out.push_back(std::to_string(lane.rank) + " " + t.name_of(lane.spans[r.span]));
  }
  return out;
}

}  // namespace

class SearchRangeTest : public QObject {
  Q_OBJECT

 private slots:
  void finds_by_name_and_keys() {
    const TraceModel t = read_trace_file(testing::data_file("trace_small.json"));
    // Four fc1 forwards (case does not matter), in time order; fc1_bwd matches too.
    QCOMPARE(named(t, find_spans(t, parse_search("FC1 phase:fwd"))),
             (std::vector<std::string>{"0 fc1", "0 fc1", "1 fc1", "1 fc1"}));
    QCOMPARE(find_spans(t, parse_search("fc1")).size(), std::size_t{6});
    QCOMPARE(named(t, find_spans(t, parse_search("cat:pp mb:1"))), (std::vector<std::string>{"0 send_act"}));
    QCOMPARE(named(t, find_spans(t, parse_search("cat:attention"))),
             (std::vector<std::string>{"1 attn_bwd", "1 attn_bwd"}));
    QCOMPARE(find_spans(t, parse_search("lane:pp-send")).size(), std::size_t{2});
    QVERIFY(find_spans(t, parse_search("fc1 mb:7")).empty());
    QVERIFY(find_spans(t, parse_search("   ")).empty());  // an empty query matches nothing
    for (const char* bad : {"cat:gemx", "mb:x", "colour:red", "phase:forward"}) {
      bool threw = false;
      try {
        parse_search(bad);
      } catch (const InputError& e) {
        threw = e.message().find(bad) != std::string::npos && e.message().find("allowed") != std::string::npos;
        if (std::string(bad) == "mb:x") threw = e.message().find("integer") != std::string::npos;
      }
      QVERIFY2(threw, bad);
    }
  }

  void next_and_previous_wrap_around() {
    const TraceModel t = read_trace_file(testing::data_file("trace_small.json"));
    const auto m = find_spans(t, parse_search("fc1 phase:fwd"));  // starts 0, 100, 110, 210 us
    QCOMPARE(next_match(t, m, std::nullopt, 105000, false), std::int64_t{2});  // the first at or after 105 us
    QCOMPARE(next_match(t, m, std::nullopt, 105000, true), std::int64_t{1});
    QCOMPARE(next_match(t, m, m[3], 0, false), std::int64_t{0});  // wraps
    QCOMPARE(next_match(t, m, m[0], 0, true), std::int64_t{3});
    QCOMPARE(next_match(t, {}, std::nullopt, 0, false), std::int64_t{-1});
  }

  // [50 us, 450 us]: gemm 50 + 100 + 50 (rank 0) + 100 + 100 (rank 1) = 400 us;
  // attention 45.5 + 44.5 = 90; pp 10 + 10 = 20; dp 50. Busy: rank 0's compute
  // 200 of 400 us, rank 1's 290 (110 to 400): 61.25% over the two lanes.
  void range_summary_against_the_fixture() {
    const TraceModel t = read_trace_file(testing::data_file("trace_small.json"));
    const RangeStats st = range_stats(t, 450000, 50000);  // either order
    QCOMPARE(st.start_ns, TimeNs{50000});
    QCOMPARE(st.end_ns, TimeNs{450000});
    QCOMPARE(st.ranks, 2);
    QCOMPARE(st.category_ns[static_cast<int>(Category::kGemm)], 400000.0);
    QCOMPARE(st.category_ns[static_cast<int>(Category::kAttention)], 90000.0);
    QCOMPARE(st.category_ns[static_cast<int>(Category::kPp)], 20000.0);
    QCOMPARE(st.category_ns[static_cast<int>(Category::kDp)], 50000.0);
    QCOMPARE(st.streams.at("compute").lanes, 2);
    QCOMPARE(st.streams.at("compute").busy_ns, 490000.0);
    QCOMPARE(st.streams.at("compute").share(st.end_ns - st.start_ns), 0.6125);
    QCOMPARE(st.exposed_ranks, 0);
    const std::string text = describe(st);
    QVERIFY2(text.find("compute") != std::string::npos && text.find("61.3%") != std::string::npos, text.c_str());
  }

  // Overlapping tasks on one lane (a measured trace's) count once toward busy
  // time; the exposed lanes give a per-rank mean of the waiting.
  void busy_time_counts_overlaps_once_and_exposed_is_per_rank() {
    const TraceModel t = read_trace_text(
        R"json({"traceEvents":[
{"ph":"M","name":"thread_name","pid":0,"tid":8,"args":{"name":"exposed"}},
{"ph":"M","name":"thread_name","pid":1,"tid":8,"args":{"name":"exposed"}},
{"ph":"X","name":"a","cat":"gemm","pid":0,"tid":0,"ts":0,"dur":10},
{"ph":"X","name":"b","cat":"gemm","pid":0,"tid":0,"ts":5,"dur":10},
{"ph":"X","name":"exposed tp","cat":"tp","pid":0,"tid":8,"ts":15,"dur":4},
{"ph":"X","name":"exposed tp","cat":"tp","pid":1,"tid":8,"ts":0,"dur":2},
{"ph":"X","name":"bubble","cat":"bubble","pid":1,"tid":8,"ts":2,"dur":18}]})json",
        "overlap.json");
    const RangeStats st = range_stats(t, 0, 20000);
    QCOMPARE(st.streams.at("compute").busy_ns, 15000.0);             // [0, 15], not 20
    QCOMPARE(st.category_ns[static_cast<int>(Category::kGemm)], 20000.0);  // task time: both
    QCOMPARE(st.exposed_ranks, 2);
    QCOMPARE(st.exposed_ns_per_rank[static_cast<int>(Category::kTp)], 3000.0);      // (4 + 2) / 2
    QCOMPARE(st.exposed_ns_per_rank[static_cast<int>(Category::kBubble)], 9000.0);  // 18 / 2
    QCOMPARE(st.category_ns[static_cast<int>(Category::kTp)], 0.0);  // waits are not tasks
  }

  // The overview's columns from the fixture, 50 us each over [0, 850 us]: the two
  // compute lanes' mean busy share per column.
  void overview_columns_against_the_fixture() {
    const TraceModel t = read_trace_file(testing::data_file("trace_small.json"));
    const auto cols = overview(t, 0, 850000, 17);
    QCOMPARE(cols.size(), std::size_t{17});
    QCOMPARE(cols[0].compute, 0.5);   // rank 0's fc1; rank 1 idle until 110 us
    QCOMPARE(cols[2].compute, 0.9);   // [100, 150): rank 0 all, rank 1 from 110 (40 of 50)
    QCOMPARE(cols[6].compute, 0.5);   // [300, 350): rank 1 busy (fc1, then attn_bwd), rank 0 in its bubble
    QCOMPARE(cols[16].compute, 0.5);  // adam on rank 0
    QCOMPARE(cols[0].exposed, 0.0);   // no exposed lanes in this trace
  }

  // Exposed lanes: waiting other than bubble, and bubble, as mean shares.
  void overview_of_the_exposed_lanes() {
    const TraceModel t = read_trace_text(
        R"json({"traceEvents":[
{"ph":"M","name":"thread_name","pid":0,"tid":8,"args":{"name":"exposed"}},
{"ph":"M","name":"thread_name","pid":1,"tid":8,"args":{"name":"exposed"}},
{"ph":"X","name":"fc1","cat":"gemm","pid":0,"tid":0,"ts":0,"dur":20},
{"ph":"X","name":"exposed tp","cat":"tp","pid":0,"tid":8,"ts":0,"dur":5},
{"ph":"X","name":"bubble","cat":"bubble","pid":1,"tid":8,"ts":0,"dur":10}]})json",
        "exposed.json");
    const auto cols = overview(t, 0, 20000, 2);  // 10 us a column
    QCOMPARE(cols[0].exposed, 0.25);  // 5 of 10 us on one of two exposed lanes
    QCOMPARE(cols[0].bubble, 0.5);
    QCOMPARE(cols[1].bubble, 0.0);
    QCOMPARE(cols[1].compute, 1.0);
  }
};

int run_search_range_tests(int argc, char** argv) { return testing::run<SearchRangeTest>(argc, argv); }

}  // namespace strata::gui

#include "search_range_test.moc"
