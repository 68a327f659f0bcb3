// sweep.csv / sweep.json, result.json and memory.json reading, file kind
// detection, the sweep's per-plan memory from the memory model, the topology
// picture and the task texts.
#include <QTemporaryDir>
#include <QTest>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>
#include <cmath>

#include "costmodel/profile.h"
#include "core/error.h"
#include "gui/model/file_loader.h"
#include "gui/model/plan_memory.h"
#include "gui/model/span_text.h"
#include "gui/model/sweep_data.h"
#include "gui/model/sweep_format.h"
#include "gui/model/topology_picture.h"
#include "gui/model/trace_reader.h"
#include "gui_test_support.h"

namespace strata::gui {

class FilesTest : public QObject {
  Q_OBJECT

 private slots:
  // sweep.json as `strata sweep` writes it (docs/formats.md): the plan keys live
  // under `plan`, the metrics under `result`, exposed time under
  // result.exposed_comm_s. sweep_cli.json is the first three plans of
  // `strata sweep --model llama3-8b --cluster dgx-h100-1node --global-batch-size 64`
  // and the first it did not simulate (no rank, no result: why and its memory).
  void sweep_json_as_strata_sweep_writes_it() {
    const SweepData s = read_sweep_json(testing::data_file("sweep_cli.json"));
    QCOMPARE(s.rows.size(), std::size_t{4});
    const SweepRow& pruned = s.rows[3];
    QVERIFY(!pruned.fits);
    QVERIFY(!pruned.result.has_value());
    QCOMPARE(pruned.cells[s.column("rank")], std::string());
    QCOMPARE(pruned.cells[s.column("prune_reason")], std::string("activations exceed memory"));
    QVERIFY(pruned.numbers[s.column("peak_bytes")] > pruned.numbers[s.column("capacity_bytes")]);
    QCOMPARE(pruned.plan["schedule"].get<std::string>(), std::string("zb-h1"));
    const SweepRow& second = s.rows[1];
    QCOMPARE(second.cells[s.column("rank")], std::string("2"));
    QCOMPARE(second.cells[s.column("tp")], std::string("1"));
    QCOMPARE(second.cells[s.column("dp")], std::string("8"));
    QCOMPARE(second.cells[s.column("recompute")], std::string("selective"));
    QCOMPARE(second.cells[s.column("fidelity")], std::string("full"));
    QCOMPARE(second.numbers[s.column("exposed_dp_s")], 0.007275175000000001);
    QCOMPARE(second.numbers[s.column("exposed_zero_s")], 0.0036461880000000007);
    QCOMPARE(second.numbers[s.column("headroom")], 0.07396056602812084);
    QCOMPARE(second.cells[s.column("flash_attention")], std::string("true"));
    QVERIFY(second.fits);
    QCOMPARE(second.plan["recompute"].get<std::string>(), std::string("selective"));
    QVERIFY(second.result.has_value());
    QCOMPARE(second.result->step_time_s, second.numbers[s.column("step_time_s")]);
    QCOMPARE(second.result->exposed.dp_s, 0.007275175000000001);
    QCOMPARE(s.request["model"].get<std::string>(), std::string("llama3-8b"));
  }

  void sweep_csv() {
    const SweepData s = read_sweep_csv(testing::data_file("sweep.csv"));
    QCOMPARE(s.columns, sweep_columns());
    QCOMPARE(s.rows.size(), std::size_t{5});
    const SweepRow& first = s.rows[0];
    QVERIFY(first.fits);
    QCOMPARE(first.numbers[s.column("step_time_s")], 9.5);
    // A quoted field keeps its comma.
    QCOMPARE(first.cells[s.column("why")], std::string("fastest: TP inside NVLink, no bubble"));
    // A plan that does not fit has no rank: empty text, NaN number.
    QVERIFY(!s.rows[3].fits);
    QCOMPARE(s.rows[3].cells[s.column("rank")], std::string());
    QVERIFY(std::isnan(s.rows[3].numbers[s.column("rank")]));
    // The plan.json object rebuilt from the columns.
    const nlohmann::json expected = {{"tp", 2},
                                     {"cp", 1},
                                     {"pp", 1},
                                     {"dp", 4},
                                     {"vpp", 1},
                                     {"micro_batch_size", 1},
                                     {"global_batch_size", 64},
                                     {"zero_stage", 1},
                                     {"schedule", "1f1b"},
                                     {"recompute", "none"},
                                     {"offload_optimizer", false},
                                     {"sequence_parallel", true}};
    QVERIFY2(first.plan == expected, first.plan.dump().c_str());
  }

  void sweep_csv_errors() {
    try {
      read_sweep_csv(testing::data_file("bad_sweep.csv"));
      QFAIL("no error");
    } catch (const InputError& e) {
      QVERIFY2(e.file().find("bad_sweep.csv:3") != std::string::npos, e.what());
      QVERIFY2(e.message().find("\"fits\"") != std::string::npos, e.what());
      QVERIFY2(e.message().find("maybe") != std::string::npos, e.what());
    }
    try {
      read_sweep_csv_text("rank,tp,pp\n1,2,3\n", "no-fits.csv");
      QFAIL("no error");
    } catch (const InputError& e) {
      QCOMPARE(e.file(), std::string("no-fits.csv:1"));
      QVERIFY(e.message().find("no \"dp\" column") != std::string::npos);
    }
    try {
      read_sweep_csv_text("tp,pp,dp,fits\n1,2,3\n", "short.csv");
      QFAIL("no error");
    } catch (const InputError& e) {
      QCOMPARE(e.file(), std::string("short.csv:2"));
      QVERIFY(e.message().find("3 fields, but the header has 4 columns") != std::string::npos);
    }
  }

  void sweep_json() {
    const SweepData s = read_sweep_json(testing::data_file("sweep.json"));
    QCOMPARE(s.rows.size(), std::size_t{5});
    QCOMPARE(s.request["model"].get<std::string>(), std::string("llama3-8b"));
    QCOMPARE(s.counts["enumerated"].get<int>(), 9);
    QVERIFY(s.rows[0].result.has_value());
    QCOMPARE(s.rows[0].result->memory->stages.size(), std::size_t{1});
    QCOMPARE(s.rows[0].result->memory->stages[0].total_bytes, 61e9);
    QCOMPARE(s.rows[0].trace_file, testing::data_file("trace_small.json"));
    QVERIFY(!s.rows[1].result.has_value());
    QCOMPARE(s.rows[1].plan["tp"].get<int>(), 4);
    QCOMPARE(s.rows[1].cells[s.column("sequence_parallel")], std::string("true"));
    QCOMPARE(s.rows[1].numbers[s.column("peak_bytes")], 44e9);
    // plan.json leaves cp out at its default: the table shows 1, not an empty cell.
    QVERIFY(!s.rows[1].plan.contains("cp"));
    QCOMPARE(s.rows[1].cells[s.column("cp")], std::string("1"));
  }

  // Headers in words with units, and one unit and precision per column, from its
  // largest value (data/sweep.csv: step times 9.5 to 11 s, exposed TP 0.1 to 0.8 s,
  // exposed DP 0.02 to 0.16 s, exposed ZeRO all 0).
  void sweep_columns_in_words_with_one_unit_each() {
    const SweepData s = read_sweep_csv(testing::data_file("sweep.csv"));
    const std::vector<ColumnFormat> formats = sweep_column_formats(s);
    QCOMPARE(formats.size(), s.columns.size());
    auto shown = [&](const char* column, std::size_t row) {
      const int c = s.column(column);
      return format_cell(formats[c], s.rows[row].cells[c], s.rows[row].numbers[c]);
    };
    auto header = [&](const char* column) { return formats[s.column(column)].header; };
    QCOMPARE(header("step_time_s"), std::string("step time (s)"));
    QCOMPARE(shown("step_time_s", 0), std::string("9.5"));
    QCOMPARE(shown("step_time_s", 2), std::string("11.0"));  // the same decimals down the column
    QCOMPARE(header("exposed_tp_s"), std::string("exposed TP (ms)"));
    QCOMPARE(shown("exposed_tp_s", 0), std::string("200"));
    QCOMPARE(shown("exposed_tp_s", 4), std::string("800"));
    QCOMPARE(header("exposed_dp_s"), std::string("exposed DP (ms)"));
    QCOMPARE(shown("exposed_dp_s", 4), std::string("20"));
    QCOMPARE(header("exposed_zero_s"), std::string("exposed ZeRO (s)"));
    QCOMPARE(shown("exposed_zero_s", 0), std::string("0"));
    QCOMPARE(header("mfu"), std::string("MFU (%)"));
    QCOMPARE(shown("mfu", 0), std::string("52.0"));
    QCOMPARE(header("peak_bytes"), std::string("peak memory (GiB)"));
    QCOMPARE(shown("peak_bytes", 0), std::string("56.8"));  // 61e9 / 2^30
    QCOMPARE(header("tokens_per_s"), std::string("tokens/s"));
    QCOMPARE(shown("tokens_per_s", 0), std::string("55,188"));
    QCOMPARE(shown("tflops_per_gpu", 0), std::string("162.2"));
    QCOMPARE(header("tp"), std::string("TP"));
    QCOMPARE(shown("schedule", 0), std::string("1f1b"));
    QCOMPARE(shown("fits", 3), std::string("false"));
    QCOMPARE(shown("rank", 3), std::string(""));  // a plan that does not fit has no rank
    QCOMPARE(shown("step_time_s", 3), std::string(""));
    QCOMPARE(formats[s.column("step_time_s")].tooltip, std::string("step_time_s: time per training step"));
  }

  void memory_of_a_sweep_plan_from_the_memory_model() {
    // Plan 2 of the fixture sweep: llama3-8b, tp 4, on one DGX A100 node. Its
    // weights per GPU are 2 bytes x 8.03e9 parameters / tp 4 (Meta's model card:
    // 8.03B; Megatron splits the embedding and output layer over tp too).
    const SweepData s = read_sweep_json(testing::data_file("sweep.json"));
    const MemoryReport m = memory_for_sweep_plan(s, s.rows[1]);
    QCOMPARE(m.stages.size(), std::size_t{1});
    const double expected = 2.0 * 8.03e9 / 4.0;
    QVERIFY2(std::abs(m.stages[0].params_bytes - expected) < 0.01 * expected,
             std::to_string(m.stages[0].params_bytes).c_str());
    // Capacity is the cluster's device profile (dgx-a100-1node: a100-sxm4-80gb).
    QCOMPARE(m.capacity_bytes, load_profile("a100-sxm4-80gb").device.memory_bytes);
    // A sweep.csv has no request: the error says to open sweep.json.
    const SweepData csv = read_sweep_csv(testing::data_file("sweep.csv"));
    try {
      memory_for_sweep_plan(csv, csv.rows[1]);
      QFAIL("no error");
    } catch (const InputError& e) {
      QVERIFY(e.message().find("sweep.json") != std::string::npos);
    }
  }

  void result_json() {
    const ResultData r = read_result_file(testing::data_file("run/result.json"));
    QCOMPARE(r.step_time_s, 0.00085);
    QCOMPARE(r.mfu, 0.41);
    QCOMPARE(r.bubble_ratio_per_stage, (std::vector<double>{0.2, 0.3}));
    QCOMPARE(r.exposed.dp_s, 1e-4);
    // A dense plan without cp has neither of these; an MoE plan's result has ep.
    QCOMPARE(r.exposed.cp_s, -1.0);
    QCOMPARE(r.exposed.ep_s, -1.0);
    {
      QTemporaryDir dir;
      nlohmann::json moe = nlohmann::json::parse(std::ifstream(testing::data_file("run/result.json")));
      moe["exposed_comm_s"]["ep"] = 0.25;
      const std::string path = dir.filePath("result.json").toStdString();
      std::ofstream(path) << moe.dump();
      QCOMPARE(read_result_file(path).exposed.ep_s, 0.25);
    }
    QCOMPARE(r.fidelity, std::string("full"));
    QVERIFY(r.memory.has_value());
    QCOMPARE(r.memory->stages.size(), std::size_t{2});
    QCOMPARE(r.memory->stages[1].total_bytes, 85e9);
    QCOMPARE(r.memory->peak_stage, 1);
    QVERIFY(!r.memory->fits);
    QCOMPARE(r.links.size(), std::size_t{11});
    QCOMPARE(describe_inputs(r.inputs), std::string("tiny · tp 1 pp 2 dp 1 · fixture-2node"));
    try {
      read_result_file(testing::data_file("bad_schema.json"));
      QFAIL("no error");
    } catch (const InputError& e) {
      QCOMPARE(e.json_path(), std::string("$.schema"));
      QVERIFY(e.message().find("strata-result/1") != std::string::npos);
    }
  }

  // A sampled result's distribution and what-if; a bad sampled step or interval
  // names its JSON path.
  void sampled_result_json() {
    const ResultData r = read_result_file(testing::data_file("sampled/result.json"));
    QVERIFY(r.distribution.has_value());
    QCOMPARE(r.distribution->step_time_s.size(), std::size_t{20});
    QCOMPARE(r.distribution->noiseless_step_time_s, 0.98);
    QCOMPARE(r.distribution->p90.value, 1.082);
    QCOMPARE(r.distribution->p90.ci_high, 1.15);
    QCOMPARE(r.distribution->clock_cv, 0.03);
    QCOMPARE(r.what_if->baseline_step_time_s, 0.784);
    QCOMPARE(r.what_if->slowed, std::string("rank 7 x1.20"));
    QVERIFY(!read_result_file(testing::data_file("run/result.json")).distribution.has_value());
    auto fails_at = [](const char* what, const std::function<void(nlohmann::json&)>& edit, const std::string& path) {
      QTemporaryDir dir;
      nlohmann::json doc = nlohmann::json::parse(std::ifstream(testing::data_file("sampled/result.json")));
      edit(doc);
      const std::string file = dir.filePath("result.json").toStdString();
      std::ofstream(file) << doc.dump();
      try {
        read_result_file(file);
        QFAIL(what);
      } catch (const InputError& e) {
        QCOMPARE(e.json_path(), path);
      }
    };
    fails_at("negative step", [](nlohmann::json& d) { d["distribution"]["step_time_s"][2] = -1.0; },
             "$.distribution.step_time_s[2]");
    fails_at("interval reversed", [](nlohmann::json& d) { d["distribution"]["p50_s"]["ci95"] = {2.0, 1.0}; },
             "$.distribution.p50_s.ci95");
    fails_at("traced sample past the samples", [](nlohmann::json& d) { d["distribution"]["traced_sample"]["sample"] = 20; },
             "$.distribution.traced_sample.sample");
    fails_at("what-if without its baseline", [](nlohmann::json& d) { d["what_if"].erase("baseline_step_time_s"); },
             "$.what_if.baseline_step_time_s");
  }

  void file_kinds() {
    QCOMPARE(detect_file_kind(testing::data_file("trace_small.json")), FileKind::kTrace);
    QCOMPARE(detect_file_kind(testing::data_file("run/result.json")), FileKind::kResult);
    QCOMPARE(detect_file_kind(testing::data_file("sweep.csv")), FileKind::kSweep);
    QCOMPARE(detect_file_kind(testing::data_file("sweep.json")), FileKind::kSweep);
    QCOMPARE(detect_file_kind(testing::data_file("memory_gpt3.json")), FileKind::kMemory);
    QVERIFY_THROWS_EXCEPTION(InputError, detect_file_kind(testing::data_file("bad_unknown.json")));
    // A result finds the trace written beside it.
    const LoadedFile f = load_file(testing::data_file("run/result.json"));
    QVERIFY(f.result.has_value());
    QVERIFY(f.trace != nullptr);
    QCOMPARE(f.trace->num_spans(), std::size_t{12});
  }

  void memory_json_from_strata_memory() {
    // Written by `strata memory --model gpt3-175b --plan gpt3-175b-1024
    // --cluster dgx-a100-128node --json` (tests/gui/data/README.md): pp 8, so 8 stages.
    const LoadedFile f = load_file(testing::data_file("memory_gpt3.json"));
    QVERIFY(f.memory.has_value());
    QCOMPARE(f.memory->memory.stages.size(), std::size_t{8});
    QCOMPARE(f.memory->inputs["plan"]["pp"].get<int>(), 8);
    QCOMPARE(f.memory->memory.capacity_bytes, load_profile("a100-sxm4-80gb").device.memory_bytes);
    double peak = 0.0;
    for (const StageMemory& s : f.memory->memory.stages) peak = std::max(peak, s.total_bytes);
    QCOMPARE(f.memory->memory.peak_bytes, peak);
  }

  void topology_graph_and_pictures() {
    const ResultData r = read_result_file(testing::data_file("run/result.json"));
    const TopologyGraph g = TopologyGraph::from_links(r.links);
    // Per node gpu0, nvswitch0, pcie0, nic0; plus leaf0 and spine0.
    QCOMPARE(g.vertices().size(), std::size_t{10});
    // Per node 4 links (nic0-leaf0 both directions in one); plus leaf0-spine0.
    QCOMPARE(g.edges().size(), std::size_t{9});
    QCOMPARE(g.nodes(), (std::vector<int>{0, 1}));
    // node1/nic0 -> leaf0 is 80% busy, leaf0 -> node1/nic0 20%: the link shows 80%.
    bool found = false;
    for (const TopoEdge& e : g.edges()) {
      if (g.vertices()[e.a].label == "leaf0" && g.vertices()[e.b].label == "node1/nic0") {
        QCOMPARE(e.utilization_ab, 0.2);
        QCOMPARE(e.utilization_ba, 0.8);
        QCOMPARE(e.utilization(), 0.8);
        QCOMPARE(e.bytes_ab + e.bytes_ba, 3e8);
        found = true;
      }
    }
    QVERIFY(found);

    const TopologyPicture fabric = fabric_picture(g);
    // leaf0, spine0 and two node boxes; node-leaf links merge per node.
    QCOMPARE(fabric.items.size(), std::size_t{4});
    QCOMPARE(fabric.links.size(), std::size_t{3});
    for (const PictureItem& item : fabric.items) {
      if (item.label == "spine0") QCOMPARE(item.y, 0.0);
      if (item.label == "leaf0") QCOMPARE(item.y, kTierGap);
      if (item.node_box) QCOMPARE(item.y, 2 * kTierGap);
      if (item.node_box && item.node == 1) QCOMPARE(item.utilization, 0.8);
      if (item.node_box && item.node == 0) QCOMPARE(item.utilization, 0.4);
    }
    const TopologyPicture node0 = node_picture(g, 0);
    // leaf0 above; nic0, pcie0, gpu0, nvswitch0 in four tiers below it.
    QCOMPARE(node0.items.size(), std::size_t{5});
    QCOMPARE(node0.links.size(), std::size_t{4});
    for (const PictureItem& item : node0.items) {
      if (item.label == "leaf0") QCOMPARE(item.y, 0.0);
      if (item.label == "nic0") QCOMPARE(item.y, kTierGap);
      if (item.label == "gpu0") QCOMPARE(item.y, 3 * kTierGap);
      if (item.label == "nvswitch0") QCOMPARE(item.y, 4 * kTierGap);
    }
  }

  void vertex_labels_data() {
    QTest::addColumn<QString>("label");
    QTest::addColumn<int>("node");
    QTest::addColumn<QString>("type");
    QTest::addColumn<int>("index");
    QTest::newRow("gpu") << "node12/gpu7" << 12 << "gpu" << 7;
    QTest::newRow("simulator's form") << "n3.gpu5" << 3 << "gpu" << 5;
    QTest::newRow("single switch") << "n0.nvswitch" << 0 << "nvswitch" << 0;
    QTest::newRow("not a node") << "nic.7" << -1 << "nic." << 7;
    QTest::newRow("spine") << "spine3" << -1 << "spine" << 3;
    QTest::newRow("pcie switch") << "node0/pcie_switch1" << 0 << "pcie_switch" << 1;
    QTest::newRow("no number") << "core" << -1 << "core" << 0;
  }
  void vertex_labels() {
    QFETCH(QString, label);
    QFETCH(int, node);
    QFETCH(QString, type);
    QFETCH(int, index);
    const TopoVertex v = parse_vertex_label(label.toStdString());
    QCOMPARE(v.node, node);
    QCOMPARE(QString::fromStdString(v.type), type);
    QCOMPARE(v.index, index);
  }

  void task_texts() {
    QCOMPARE(format_flops(2e10), std::string("20 GFLOP"));
    QCOMPARE(format_flops(4.55e9), std::string("4.55 GFLOP"));
    QCOMPARE(format_flops(512), std::string("512 FLOP"));
    QCOMPARE(format_bytes(1048576), std::string("1.0 MiB"));
    QCOMPARE(format_bytes(2.5e8), std::string("238.4 MiB"));  // 2.5e8 / 2^20 = 238.42
    QCOMPARE(format_bytes(512), std::string("512 B"));
    const TraceModel t = read_trace_file(testing::data_file("trace_small.json"));
    const Lane& r1 = t.lanes[2];
    // attn_bwd of micro-batch 0: 4.55e9 FLOPs in 45.5 us = 100.0 TFLOP/s.
    QCOMPARE(span_description(t, r1, r1.spans[2]),
             std::string("attn_bwd\ncategory: attention\nrank 1 · compute\nmicro-batch: 0\n"
                         "layer: 1\nphase: bwd\nstart: 310 µs\nduration: 45.5 µs\n"
                         "FLOPs: 4.55 GFLOP (100.0 TFLOP/s)"));
    // send_act: 1 MiB in 10 us = 104.9 GB/s.
    const Lane& send = t.lanes[1];
    QCOMPARE(
        span_description(t, send, send.spans[0]),
        std::string("send_act\ncategory: pp\nrank 0 · pp-send\nmicro-batch: 0\n"
                    "phase: fwd\nstart: 100 µs\nduration: 10 µs\nbytes: 1.0 MiB (104.9 GB/s)"));
  }
};

int run_files_tests(int argc, char** argv) { return testing::run<FilesTest>(argc, argv); }

}  // namespace strata::gui

#include "files_test.moc"
