// Reading trace.json: the fixture's values arrive exactly (ns precision), lanes
// and names are right, and bad files give errors naming the file and JSON path.
#include "gui/model/trace_reader.h"

#include <QTest>

#include "core/error.h"
#include "gui_test_support.h"

namespace strata::gui {

namespace {

// A trace written one event per line, as sim/trace_writer writes it: `ranks`
// ranks of two lanes each, `per_lane` spans a lane, names from a small set, the
// header after the events (so it arrives in the last part).
std::string one_event_per_line_trace(int ranks, int per_lane) {
  static const char* const kNames[] = {"qkv", "attn", "proj", "fc1", "fc2", "allreduce"};
  static const char* const kCats[] = {"gemm", "attention", "gemm", "gemm", "gemm", "tp"};
  std::string t = "{\"traceEvents\":[\n";
  bool first = true;
  auto line = [&](const std::string& e) {
    t += (first ? "" : ",\n") + e;
    first = false;
  };
  for (int r = 0; r < ranks; ++r) {
    line("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + std::to_string(r) +
         ",\"args\":{\"name\":\"rank " + std::to_string(r) + "\"}}");
    for (int lane = 0; lane < 2; ++lane) {
      line("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + std::to_string(r) + ",\"tid\":" +
           std::to_string(lane) + ",\"args\":{\"name\":\"" + (lane == 0 ? "compute" : "tp-comm") + "\"}}");
      for (int i = 0; i < per_lane; ++i) {
        const int k = (i + r + lane) % 6;
        line("{\"ph\":\"X\",\"name\":\"" + std::string(kNames[k]) + "\",\"cat\":\"" + kCats[k] +
             "\",\"pid\":" + std::to_string(r) + ",\"tid\":" + std::to_string(lane) +
             ",\"ts\":" + std::to_string(10 * i) + ".25,\"dur\":" + std::to_string(5 + i % 4) +
             ".5,\"args\":{\"mb\":" + std::to_string(i % 8) + ",\"layer\":" + std::to_string(i % 3) +
             ",\"chunk\":0,\"phase\":\"" + (i % 2 ? "bwd" : "fwd") + "\",\"flops\":" +
             std::to_string(1000 * i) + ",\"bytes\":" + std::to_string(7 * i) + "}}");
        // Every 50th tp-comm task flows to the next rank's compute task at the same
        // time; the ends lie far apart in the file, so in different parts.
        if (i % 50 == 0 && lane == 1 && r + 1 < ranks) {
          line("{\"ph\":\"s\",\"id\":" + std::to_string(r * 1000 + i) + ",\"name\":\"send\",\"cat\":\"pp\",\"pid\":" +
               std::to_string(r) + ",\"tid\":1,\"ts\":" + std::to_string(10 * i) + ".25}");
        }
        if (i % 50 == 0 && lane == 0 && r > 0) {
          line("{\"ph\":\"f\",\"bp\":\"e\",\"id\":" + std::to_string((r - 1) * 1000 + i) +
               ",\"name\":\"send\",\"cat\":\"pp\",\"pid\":" + std::to_string(r) + ",\"tid\":0,\"ts\":" +
               std::to_string(10 * i) + ".25}");
        }
      }
    }
  }
  t += "\n],\"otherData\":{\"strata\":{\"kind\":\"predicted\",\"model\":\"tiny\",\"step_time_s\":0.5,"
       "\"num_ranks\":" + std::to_string(ranks) + "}}}\n";
  return t;
}

}  // namespace

class TraceReaderTest : public QObject {
  Q_OBJECT

 private slots:
  // A trace cut into parts parsed on four threads is the trace parsed as one
  // part: every lane, span, name and detail, and the header from the last part.
  void parts_on_threads_equal_one_part() {
    const std::string text = one_event_per_line_trace(6, 400);
    TraceParts parts;
    parts.parallel_min_bytes = 0;
    parts.min_part_bytes = text.size() / 5;
    parts.threads = 4;
    const TraceModel whole = read_trace_text(text, "whole.json");
    const TraceModel cut = read_trace_text(text, "cut.json", parts);
    QCOMPARE(whole.num_spans(), std::size_t{6 * 2 * 400});
    QCOMPARE(cut.num_spans(), whole.num_spans());
    QCOMPARE(cut.num_ranks, 6);
    QCOMPARE(cut.step_time_s, 0.5);
    QCOMPARE(cut.model_name, std::string("tiny"));
    QCOMPARE(cut.lanes.size(), whole.lanes.size());
    QCOMPARE(whole.flows.size(), std::size_t{5 * 8});  // 8 flows between each pair of neighbours
    QVERIFY(cut.flows == whole.flows);
    // The first: rank 0's tp-comm task 0 (lane 1) to rank 1's compute task 0 (lane 2).
    QCOMPARE(whole.flows.front(), (Flow{SpanRef{1, 0}, SpanRef{2, 0}}));
    for (std::size_t l = 0; l < whole.lanes.size(); ++l) {
      const Lane& a = whole.lanes[l];
      const Lane& b = cut.lanes[l];
      QCOMPARE(b.rank, a.rank);
      QCOMPARE(b.stream_label, a.stream_label);
      QCOMPARE(b.process_label, a.process_label);
      QCOMPARE(b.spans.size(), a.spans.size());
      for (std::size_t i = 0; i < a.spans.size(); ++i) {
        QCOMPARE(b.spans[i].start_ns, a.spans[i].start_ns);
        QCOMPARE(b.spans[i].dur_ns, a.spans[i].dur_ns);
        QCOMPARE(b.spans[i].category, a.spans[i].category);
        QCOMPARE(cut.name_of(b.spans[i]), whole.name_of(a.spans[i]));
        QCOMPARE(cut.detail_of(b.spans[i]).mb, whole.detail_of(a.spans[i]).mb);
        QCOMPARE(cut.detail_of(b.spans[i]).flops, whole.detail_of(a.spans[i]).flops);
        QCOMPARE(cut.detail_of(b.spans[i]).bytes, whole.detail_of(a.spans[i]).bytes);
      }
    }
    // A bad event in a later part: the file is read again as one part, so the
    // error names the event's index in the whole file.
    std::string bad = text;
    const std::string gemm = "\"cat\":\"gemm\"";
    bad.replace(bad.rfind(gemm), gemm.size(), "\"cat\":\"gemx\"");
    QString whole_error, cut_error;
    try {
      read_trace_text(bad, "bad.json");
    } catch (const InputError& e) {
      whole_error = e.what();
    }
    try {
      read_trace_text(bad, "bad.json", parts);
    } catch (const InputError& e) {
      cut_error = e.what();
    }
    QVERIFY2(whole_error.contains("$.traceEvents["), qPrintable(whole_error));
    QCOMPARE(cut_error, whole_error);
  }

  void reads_the_fixture() {
    const TraceModel t = read_trace_file(testing::data_file("trace_small.json"));
    QCOMPARE(t.kind, std::string("predicted"));
    QCOMPARE(t.model_name, std::string("tiny"));
    QCOMPARE(t.plan["pp"].get<int>(), 2);
    QCOMPARE(t.step_time_s, 0.00085);
    QCOMPARE(t.num_ranks, 2);
    QCOMPARE(t.num_spans(), std::size_t{12});
    QCOMPARE(t.begin_ns(), TimeNs{0});
    QCOMPARE(t.end_ns(), TimeNs{850000});  // adam: 800 us + 50 us
    // Lanes by (rank, stream); labels from the thread_name metadata.
    QCOMPARE(t.lanes.size(), std::size_t{4});
    QCOMPARE(t.lanes[0].rank, 0);
    QCOMPARE(t.lanes[0].stream_label, std::string("compute"));
    QCOMPARE(t.lanes[1].stream, 3);
    QCOMPARE(t.lanes[1].stream_label, std::string("pp-send"));
    QCOMPARE(t.lanes[3].rank, 1);
    QCOMPARE(t.lanes[3].stream_label, std::string("dp-comm"));
    QCOMPARE(t.lanes[2].node, 1);
    QCOMPARE(t.lanes[2].process_label, std::string("node 1 gpu 0 (rank 1)"));

    // Rank 1's compute lane: fc1, fc1, attn_bwd (310 us, 45.5 us), attn_bwd (355.5 us, 44.5 us).
    const Lane& r1 = t.lanes[2];
    QCOMPARE(r1.spans.size(), std::size_t{4});
    QCOMPARE(r1.spans[2].start_ns, TimeNs{310000});
    QCOMPARE(r1.spans[2].dur_ns, TimeNs{45500});
    QCOMPARE(r1.spans[3].start_ns, TimeNs{355500});
    QCOMPARE(r1.spans[3].dur_ns, TimeNs{44500});
    QCOMPARE(r1.spans[2].category, Category::kAttention);
    const SpanDetail& d = t.detail_of(r1.spans[2]);
    QCOMPARE(t.name_of(r1.spans[2]), std::string("attn_bwd"));
    QCOMPARE(d.mb, 0);
    QCOMPARE(d.layer, 1);
    QCOMPARE(d.phase, Phase::kBwd);
    QCOMPARE(d.flops, 4.55e9);
    // The dp all-reduce: 300.25 us and 2.5e8 bytes.
    QCOMPARE(t.lanes[3].spans[0].dur_ns, TimeNs{300250});
    QCOMPARE(t.detail_of(t.lanes[3].spans[0]).bytes, 2.5e8);
    // The optimizer step has no micro-batch or layer.
    const Span& adam = t.lanes[0].spans.back();
    QCOMPARE(t.name_of(adam), std::string("adam"));
    QCOMPARE(t.detail_of(adam).mb, -1);
    QCOMPARE(t.detail_of(adam).phase, Phase::kStep);
    // Names are interned: fc1, fc1_bwd, adam, send_act, attn_bwd, allreduce_grads.
    QCOMPARE(t.names.size(), std::size_t{6});
  }

  void reports_progress_and_cancels() {
    std::vector<double> seen;
    read_trace_file(testing::data_file("trace_small.json"), [&](std::int64_t done, std::int64_t total, std::string_view) {
      seen.push_back(static_cast<double>(done) / static_cast<double>(total));
      return true;
    });
    QVERIFY(seen.size() >= 2);
    QCOMPARE(seen.front(), 0.0);
    QCOMPARE(seen.back(), 1.0);
    QVERIFY_THROWS_EXCEPTION(Cancelled, read_trace_file(testing::data_file("trace_small.json"),
                                                        [](std::int64_t, std::int64_t, std::string_view) { return false; }));
  }

  void bad_files_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<QString>("where");
    QTest::addColumn<QString>("json_path");
    QTest::addColumn<QString>("says");
    // traceEvents[5] is the third complete event (after process_name,
    // process_sort_index and the compute thread_name of rank 0).
    QTest::newRow("unknown category") << "bad_category.json"
                                      << "bad_category.json"
                                      << "$.traceEvents[5].cat"
                                      << "unknown category \"gemmm\"";
    QTest::newRow("missing dur") << "bad_missing_dur.json"
                                 << "bad_missing_dur.json"
                                 << "$.traceEvents[3].dur"
                                 << "needs dur";
    QTest::newRow("malformed") << "bad_malformed.json"
                               << "bad_malformed.json:2:"
                               << ""
                               << "malformed JSON";
    QTest::newRow("not a trace") << "bad_unknown.json"
                                 << "bad_unknown.json"
                                 << "$.traceEvents"
                                 << "missing";
    QTest::newRow("absent") << "no_such_file.json"
                            << "no_such_file.json"
                            << ""
                            << "cannot open";
  }
  void bad_files() {
    QFETCH(QString, file);
    QFETCH(QString, where);
    QFETCH(QString, json_path);
    QFETCH(QString, says);
    try {
      read_trace_file(testing::data_file(file.toStdString()));
      QFAIL("no error");
    } catch (const InputError& e) {
      QVERIFY2(QString::fromStdString(e.file()).contains(where), e.what());
      QCOMPARE(QString::fromStdString(e.json_path()), json_path);
      QVERIFY2(QString::fromStdString(e.message()).contains(says), e.what());
    }
  }

  // The measured trace as `strata run` writes it (runtime/executor/measured.cc,
  // measured_trace_json): metadata first, then each rank's events, process names
  // carrying the rank's coordinates, nanosecond display unit, and otherData with
  // the run's backend and step. Hand-written in that exact shape.
  void reads_the_runtimes_measured_form() {
    const TraceModel t = read_trace_text(
        R"J({"traceEvents":[
{"ph":"M","name":"process_name","pid":0,"args":{"name":"node 0 gpu 0 (rank 0: tp 0 dp 0 pp 0)"}},
{"ph":"M","name":"process_sort_index","pid":0,"args":{"sort_index":0}},
{"ph":"M","name":"thread_name","pid":0,"tid":0,"args":{"name":"compute"}},
{"ph":"M","name":"thread_name","pid":0,"tid":3,"args":{"name":"pp-send"}},
{"ph":"M","name":"process_name","pid":1,"args":{"name":"node 1 gpu 0 (rank 1: tp 0 dp 0 pp 1)"}},
{"ph":"M","name":"process_sort_index","pid":1,"args":{"sort_index":1}},
{"ph":"M","name":"thread_name","pid":1,"tid":0,"args":{"name":"compute"}},
{"ph":"X","name":"fc1","cat":"gemm","pid":0,"tid":0,"ts":0.000,"dur":104.000,"args":{"mb":0,"layer":0,"chunk":0,"phase":"fwd","flops":20000000000,"bytes":0}},
{"ph":"X","name":"send act","cat":"pp","pid":0,"tid":3,"ts":104.000,"dur":10.500,"args":{"mb":0,"layer":-1,"chunk":0,"phase":"fwd","flops":0,"bytes":1048576}},
{"ph":"X","name":"fc1","cat":"gemm","pid":1,"tid":0,"ts":120.250,"dur":104.000,"args":{"mb":0,"layer":2,"chunk":0,"phase":"bwd","flops":20000000000,"bytes":0}}
],
"displayTimeUnit":"ns",
"otherData":{"strata":{"kind":"measured","model":"tiny","plan":{"tp":1,"pp":2,"dp":1},"step_time_s":0.000224,"num_ranks":2,"ranks":[0,1],"backend":"cpu","step":9}}}
)J",
        "measured.trace.json");
    QCOMPARE(t.kind, std::string("measured"));
    QCOMPARE(t.model_name, std::string("tiny"));
    QCOMPARE(t.num_ranks, 2);
    QCOMPARE(t.step_time_s, 0.000224);
    QCOMPARE(t.num_spans(), std::size_t{3});
    QCOMPARE(t.lanes.size(), std::size_t{3});
    QCOMPARE(t.lanes[0].node, 0);
    QCOMPARE(t.lanes[2].node, 1);  // "node 1 gpu 0 (rank 1: ...)"
    QCOMPARE(t.lanes[2].rank, 1);
    QCOMPARE(t.lanes[1].stream_label, std::string("pp-send"));
    QCOMPARE(t.lanes[2].spans[0].start_ns, TimeNs{120250});
    QCOMPARE(t.detail_of(t.lanes[2].spans[0]).phase, Phase::kBwd);
    QCOMPARE(t.detail_of(t.lanes[1].spans[0]).bytes, 1048576.0);
    QCOMPARE(t.end_ns(), TimeNs{224250});
  }

  void text_cases() {
    // ts with three decimals is nanoseconds exactly; other phases are ignored.
    const TraceModel t = read_trace_text(
        R"({"traceEvents": [{"ph": "i", "name": "mark", "pid": 0, "tid": 0, "ts": 5},
            {"ph": "X", "name": "k", "cat": "copy", "pid": 0, "tid": 5, "ts": 1.001,
             "dur": 0.999, "args": {"extra": [1, {"a": 2}]}}]})",
        "inline");
    QCOMPARE(t.num_spans(), std::size_t{1});
    QCOMPARE(t.lanes[0].spans[0].start_ns, TimeNs{1001});
    QCOMPARE(t.lanes[0].spans[0].dur_ns, TimeNs{999});
    QCOMPARE(t.lanes[0].stream_label, std::string("copy"));
    QCOMPARE(t.lanes[0].node, -1);
    QCOMPARE(t.kind, std::string());
    // The array form of the Chrome format is refused with a clear word.
    try {
      read_trace_text("[]", "array");
      QFAIL("no error");
    } catch (const InputError& e) {
      QCOMPARE(e.json_path(), std::string("$"));
      QVERIFY(e.message().find("object form") != std::string::npos);
    }
    // A task without a name is shown with an empty one.
    const TraceModel nameless = read_trace_text(
        R"({"traceEvents": [{"ph": "X", "cat": "tp", "pid": 3, "tid": 1, "ts": 0, "dur": 2}]})",
        "nameless");
    QCOMPARE(nameless.name_of(nameless.lanes[0].spans[0]), std::string());
    // An unknown phase is named with the allowed ones.
    try {
      read_trace_text(R"({"traceEvents": [{"ph": "X", "name": "k", "cat": "gemm", "pid": 0,
                          "tid": 0, "ts": 0, "dur": 1, "args": {"phase": "forward"}}]})",
                      "phase");
      QFAIL("no error");
    } catch (const InputError& e) {
      QCOMPARE(e.json_path(), std::string("$.traceEvents[0].args.phase"));
      QVERIFY(e.message().find("\"forward\"; allowed: fwd, bwd, recompute, step, wgrad") !=
              std::string::npos);
    }
    // A zero-bubble schedule's W reads as its own phase.
    const TraceModel w = read_trace_text(
        R"({"traceEvents": [{"ph": "X", "name": "fc1 wgrad", "cat": "gemm", "pid": 0,
                            "tid": 0, "ts": 0, "dur": 1, "args": {"phase": "wgrad"}}]})",
        "wgrad");
    QCOMPARE(w.detail_of(w.lanes[0].spans[0]).phase, Phase::kWgrad);
    // Spans written out of order are sorted.
    const TraceModel u = read_trace_text(
        R"({"traceEvents": [
            {"ph": "X", "name": "b", "cat": "gemm", "pid": 0, "tid": 0, "ts": 10, "dur": 1},
            {"ph": "X", "name": "a", "cat": "gemm", "pid": 0, "tid": 0, "ts": 2, "dur": 1}]})",
        "unsorted");
    QCOMPARE(u.name_of(u.lanes[0].spans[0]), std::string("a"));
    QCOMPARE(u.lanes[0].max_end_ns, (std::vector<TimeNs>{3000, 11000}));
  }
};

int run_trace_reader_tests(int argc, char** argv) {
  return testing::run<TraceReaderTest>(argc, argv);
}

}  // namespace strata::gui

#include "trace_reader_test.moc"
