// strata-gui speed targets (issue 8): open a 1,000,000-task trace in under 3 s,
// and repaint the timeline in under 30 ms at any zoom. Results and the machine
// are recorded in docs/performance.md ("strata-gui").
//
// The trace is synthetic but shaped like a simulator trace: 64 ranks on 8 nodes,
// per rank 9,000 compute tasks, 3,000 tp-comm, 300 pp-send, 300 pp-recv, 25
// dp-comm and 3,000 exposed-lane intervals (15,625 x 64 = 1,000,000), written one
// event per line as sim/trace_writer does, with a flow from each pp-send of ranks
// 0-55 to the pp-recv it mirrors on rank r + 8 (16,800 flows). Durations vary
// from 2 us to 1 ms so every zoom level has both merged and single marks; the
// micro-batch and phase change every 56 tasks (the step blocks).
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <QApplication>
#include <QImage>
#include <QPainter>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gui/model/overview.h"
#include "gui/model/trace_reader.h"
#include "gui/widgets/timeline_widget.h"

namespace {

using strata::gui::TimelineWidget;
using strata::gui::TraceModel;

constexpr int kRanks = 64;
constexpr int kGpusPerNode = 8;

struct StreamShape {
  int tid;
  const char* name;
  int tasks;
  const char* cat;
};
constexpr StreamShape kStreams[] = {
    {0, "compute", 9000, "gemm"}, {1, "tp-comm", 3000, "tp"}, {2, "dp-comm", 25, "dp"},
    {3, "pp-send", 300, "pp"},    {4, "pp-recv", 300, "pp"},  {8, "exposed", 3000, "tp"},
};
constexpr int kPpTasks = 300;
const char* const kComputeNames[] = {"qkv", "attention", "proj", "fc1", "gelu", "fc2", "layernorm"};
const char* const kComputeCats[] = {"gemm",        "attention", "gemm",       "gemm",
                                    "elementwise", "gemm",      "elementwise"};

std::string g_trace_path;

// Writes the synthetic trace; deterministic (fixed seed).
void write_trace(const std::string& path) {
  std::mt19937_64 rng(20240601);
  std::uniform_int_distribution<int> dur_us(2, 1000);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  std::string out = "{\"traceEvents\":[\n";
  bool first = true;
  auto put = [&](const std::string& line) {
    if (!first) out += ",\n";
    first = false;
    out += line;
    if (out.size() > (8u << 20)) {
      std::fwrite(out.data(), 1, out.size(), f);
      out.clear();
    }
  };
  // Each rank's pp-send slices (ts, dur), mirrored by rank r + 8's pp-recv.
  std::vector<std::vector<std::pair<double, double>>> sends(kRanks);
  std::string flows;
  for (int r = 0; r < kRanks; ++r) {
    put(fmt::format(
        R"J({{"ph":"M","name":"process_name","pid":{},"args":{{"name":"node {} gpu {} (rank {})"}}}})J",
        r, r / kGpusPerNode, r % kGpusPerNode, r));
    for (const StreamShape& s : kStreams) {
      put(fmt::format(
          R"J({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":"{}"}}}})J", r,
          s.tid, s.name));
      double t_us = 0.0;
      for (int i = 0; i < s.tasks; ++i) {
        const int k = i % 7;
        const char* name = s.tid == 0 ? kComputeNames[k] : s.name;
        const char* cat = s.tid == 0 ? kComputeCats[k] : s.cat;
        // Communication streams idle between tasks; compute is back to back.
        const double gap_us = s.tid == 0 ? 0.0 : 12000.0 * 400.0 / s.tasks;
        double dur = s.tid == 2 ? 20000.0 : dur_us(rng);
        if (s.tid == 4 && r >= kGpusPerNode) {  // the receive of rank r - 8's send
          std::tie(t_us, dur) = sends[r - kGpusPerNode][i];
          flows += fmt::format(
              ",\n{{\"ph\":\"s\",\"id\":{},\"name\":\"send\",\"cat\":\"pp\",\"pid\":{},\"tid\":3,\"ts\":{:.3f}}}"
              ",\n{{\"ph\":\"f\",\"bp\":\"e\",\"id\":{},\"name\":\"send\",\"cat\":\"pp\",\"pid\":{},\"tid\":4,"
              "\"ts\":{:.3f}}}",
              r * kPpTasks + i, r - kGpusPerNode, t_us, r * kPpTasks + i, r, t_us);
        }
        if (s.tid == 3) sends[r].emplace_back(t_us, dur);
        put(fmt::format(
            R"J({{"ph":"X","name":"{}","cat":"{}","pid":{},"tid":{},"ts":{:.3f},"dur":{:.3f},"args":{{"mb":{},"layer":{},"chunk":0,"phase":"{}","flops":{},"bytes":{}}}}})J",
            name, cat, r, s.tid, t_us, dur, i / 56 % 32, i / 7 % 8, i % 112 < 56 ? "fwd" : "bwd",
            1.5e11, 2.5e7));
        t_us += dur + gap_us;
      }
    }
  }
  out += flows;
  out +=
      "\n],\"otherData\":{\"strata\":{\"kind\":\"predicted\",\"model\":\"synthetic\","
      "\"num_ranks\":64}}}\n";
  std::fwrite(out.data(), 1, out.size(), f);
  std::fclose(f);
}

void BM_OpenTrace(benchmark::State& state) {
  std::size_t spans = 0;
  for (auto _ : state) {
    TraceModel m = strata::gui::read_trace_file(g_trace_path);
    spans = m.num_spans();
    benchmark::DoNotOptimize(spans);
  }
  state.counters["tasks"] = static_cast<double>(spans);
  state.counters["file_MB"] = static_cast<double>(std::filesystem::file_size(g_trace_path)) / 1e6;
}
// Process CPU time: the reader parses parts of the file on several threads.
BENCHMARK(BM_OpenTrace)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

std::shared_ptr<const TraceModel>& shared_trace() {
  static std::shared_ptr<const TraceModel> trace =
      std::make_shared<const TraceModel>(strata::gui::read_trace_file(g_trace_path));
  return trace;
}

// A full repaint of a 1920 x 1080 timeline at zoom 10^-range(0) of the step,
// centred; range(1) = 1 with every node unfolded (384 lanes), 0 folded (8 rows
// each overlaying 8 compute lanes of 9,000 tasks); range(2) = 1 with every flow
// drawn (the Flows box).
void BM_RepaintTimeline(benchmark::State& state) {
  TimelineWidget w;
  w.resize(1920, 1080);
  w.set_traces({shared_trace()});
  if (state.range(1) == 1) w.set_all_collapsed(false);
  w.set_show_all_flows(state.range(2) == 1);
  const double begin = 0.0;
  const double end = static_cast<double>(shared_trace()->end_ns());
  double span = (end - begin);
  for (int i = 0; i < state.range(0); ++i) span /= 10.0;
  const double centre = 0.5 * (begin + end);
  w.set_view(centre - span / 2, centre + span / 2);
  QImage image(w.size(), QImage::Format_ARGB32_Premultiplied);
  // One untimed frame first: the process's first paint loads fonts and glyph
  // caches, which no later repaint pays again.
  w.render(&image);
  for (auto _ : state) {
    w.render(&image);
    benchmark::DoNotOptimize(image.bits());
  }
  state.counters["span_ms"] = span / 1e6;
  state.counters["arrows"] = w.flow_arrows_drawn();
}
BENCHMARK(BM_RepaintTimeline)
    ->ArgsProduct({{0, 1, 2, 3, 4, 5, 6}, {0, 1}, {0, 1}})
    ->ArgNames({"zoom_exp", "unfolded", "flows"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The overview strip's columns for the whole step, 1,720 px wide (done once per
// trace and width, on the strip's first paint after either changes).
void BM_OverviewColumns(benchmark::State& state) {
  const TraceModel& t = *shared_trace();
  for (auto _ : state) {
    auto cols = strata::gui::overview(t, t.begin_ns(), t.end_ns(), 1720);
    benchmark::DoNotOptimize(cols.data());
  }
}
BENCHMARK(BM_OverviewColumns)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  benchmark::Initialize(&argc, argv);
  const auto dir = std::filesystem::temp_directory_path() / "strata-gui-bench";
  std::filesystem::create_directories(dir);
  g_trace_path = (dir / "trace-1m.json").string();
  if (!std::filesystem::exists(g_trace_path)) write_trace(g_trace_path);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
