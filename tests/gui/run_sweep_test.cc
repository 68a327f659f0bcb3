// Run ▸ Sweep…'s model (gui/model/run_sweep.h): in the background, with progress,
// it gives the same files as `strata sweep`'s library calls on one thread, and a
// cancel stops it.
#include <QTest>
#include <atomic>
#include <mutex>

#include "costmodel/profile.h"
#include "core/data_paths.h"
#include "core/error.h"
#include "core/json_reader.h"
#include "gui/model/run_sweep.h"
#include "sim/scenario.h"
#include "sim/simulate.h"
#include "sweep/sweep.h"
#include "sweep/sweep_output.h"

namespace strata::gui {

namespace {

// tiny on one DGX A100 node, 16 sequences a step: a few dozen plans.
SweepRequest tiny_request() {
  SweepRequest r;
  r.model = "tiny";
  r.cluster = "dgx-a100-1node";
  r.global_batch_size = 16;
  r.threads = 2;
  return r;
}

}  // namespace

class RunSweepTest : public QObject {
  Q_OBJECT

 private slots:
  void background_sweep_equals_one_thread_run() {
    std::vector<double> fractions;
    std::mutex m;  // the sweep's worker threads report too
    const SweepOutput out = run_sweep(tiny_request(), [&](std::int64_t done, std::int64_t total, std::string_view) {
      const std::lock_guard<std::mutex> lock(m);
      fractions.push_back(static_cast<double>(done) / static_cast<double>(total));
      return true;
    });

    // The reference: the library in one piece, as `strata sweep` calls it.
    const ModelSpec model = load_model_spec("tiny");
    const ClusterSpec cluster = load_cluster_spec("dgx-a100-1node");
    const Profile profile = load_profile(cluster.profile);
    sim::Simulator simulator(cluster, profile);
    sim::PlanSpaceRequest space;
    space.global_batch_size = 16;
    sim::SweepOptions options;
    options.threads = 1;
    sim::SweepResult ref = sim::run_sweep(model, simulator, space, options);
    sim::rank_sweep(ref, model, simulator, options);

    QVERIFY(ref.counts.simulated > 16);
    QCOMPARE(out.sweep_csv, sim::sweep_csv(ref));
    QCOMPARE(out.sweep_json,
             sim::sweep_json(ref, sim::sweep_request_json("tiny", "dgx-a100-1node", "", model, cluster, space)).dump(2) +
                 "\n");
    QCOMPARE(out.sweep.rows.size(), ref.plans.size());
    // The table's first row is the best plan, with its rank and request.
    const int rank_col = out.sweep.column("rank");
    QCOMPARE(out.sweep.rows[0].cells[rank_col], std::string("1"));
    QCOMPARE(out.sweep.rows[0].plan["tp"].get<int>(), ref.plans[0].plan.tp);
    QCOMPARE(out.sweep.request["model"].get<std::string>(), std::string("tiny"));
    QCOMPARE(out.sweep.request["global_batch_size"].get<int>(), 16);
    const nlohmann::json doc = nlohmann::json::parse(out.sweep_json);
    QCOMPARE(doc["counts"]["simulated"].get<std::int64_t>(), ref.counts.simulated);
    // Progress ends at 1 and never goes past it.
    QVERIFY(!fractions.empty());
    QCOMPARE(fractions.back(), 1.0);
    for (double f : fractions) QVERIFY(f >= 0.0 && f <= 1.0);
  }

  void cancel_stops_the_sweep() {
    std::atomic<int> calls{0};
    bool cancelled = false;
    try {
      run_sweep(tiny_request(), [&](std::int64_t done, std::int64_t total, std::string_view) {
        ++calls;
        return static_cast<double>(done) / static_cast<double>(total) < 0.25;  // cancel once a quarter is done
      });
    } catch (const Cancelled&) {
      cancelled = true;
    }
    QVERIFY(cancelled);
    QVERIFY(calls > 1);
  }

  void bad_request_names_what_is_wrong() {
    SweepRequest r = tiny_request();
    r.model = "no-such-model";
    try {
      run_sweep(r, {});
      QFAIL("no error");
    } catch (const InputError& e) {
      QVERIFY2(QString(e.what()).contains("no-such-model"), e.what());
    }
  }
};

int run_run_sweep_tests(int argc, char** argv) {
  RunSweepTest test;
  return QTest::qExec(&test, argc, argv);
}

}  // namespace strata::gui

#include "run_sweep_test.moc"
