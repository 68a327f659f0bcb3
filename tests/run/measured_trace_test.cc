// The measured trace: events a lane holds in flight together (pipeline sends
// posted before either completes) go on tracks of their own, so that no trace
// thread holds overlapping events (issue 22 T1: Perfetto's importer dropped one
// of two in-flight "send activations" on rank 0's pp-send thread).
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/cpu/cpu_device.h"
#include "runtime/executor/measured.h"
#include "runtime/executor/pipeline_links.h"
#include "runtime/executor/recorder.h"

namespace strata::rt {
namespace {

using trace::Lane;

TEST(MeasuredTrace, InFlightSendsTakeTracksOfTheirOwn) {
  const std::unique_ptr<Device> cpu = make_cpu_device({});
  Recorder recorder(*cpu);
  recorder.begin_step();
  // two sends in flight together, a third after the first ended, a receive beside them
  recorder.add("send activations", EventCategory::kPp, Lane::kPpSend, 64, 1000, 5000);
  recorder.add("send activations", EventCategory::kPp, Lane::kPpSend, 64, 2000, 9000);
  recorder.add("send activations", EventCategory::kPp, Lane::kPpSend, 64, 5000, 6000);
  recorder.add("recv gradients", EventCategory::kPp, Lane::kPpRecv, 64, 1500, 2500);
  recorder.end_step();
  std::string array = "[";
  array += trace_events_json(recorder, 3);
  array += "]";
  const nlohmann::json events = nlohmann::json::parse(array);

  std::map<int, std::vector<std::pair<double, double>>> spans;  // tid -> [start, end) in us
  std::map<int, std::string> names;
  for (const auto& e : events) {
    ASSERT_EQ(e["pid"], 3);
    if (e["ph"] == "M") names[e["tid"].get<int>()] = e["args"]["name"];
    if (e["ph"] == "X") {
      const double ts = e["ts"].get<double>();
      spans[e["tid"].get<int>()].emplace_back(ts, ts + e["dur"].get<double>());
    }
  }
  const int send = static_cast<int>(Lane::kPpSend), recv = static_cast<int>(Lane::kPpRecv);
  const int second = send + trace::kNumLanes;
  // 1-5 us and 5-6 us share the lane's own track; 2-9 us, in flight beside them, the second
  EXPECT_EQ(spans[send], (std::vector<std::pair<double, double>>{{1.0, 5.0}, {5.0, 6.0}}));
  EXPECT_EQ(spans[second], (std::vector<std::pair<double, double>>{{2.0, 9.0}}));
  EXPECT_EQ(spans[recv], (std::vector<std::pair<double, double>>{{1.5, 2.5}}));
  EXPECT_EQ(spans.size(), 3u);
  EXPECT_EQ(names[second], std::string(trace::to_string(Lane::kPpSend)) + " (2)");
}

// A transfer's id is what pairs its send with its receive across ranks: distinct
// for every pipeline, kind, micro-batch and sending virtual stage of a job.
TEST(MeasuredTrace, PipelineTransferIdsAreUniqueInTheJob) {
  PlanSpec p;
  p.tp = 2;
  p.cp = 2;
  p.dp = 3;
  p.pp = 2;
  p.vpp = 2;
  p.micro_batch_size = 1;
  p.global_batch_size = 12;  // 4 micro-batches per pipeline
  std::set<std::int64_t> ids;
  int n = 0;
  for (int tp = 0; tp < p.tp; ++tp) {
    for (int cp = 0; cp < p.cp; ++cp) {
      for (int dp = 0; dp < p.dp; ++dp) {
        for (LinkKind kind : {LinkKind::kActivations, LinkKind::kGradients}) {
          for (int mb = 0; mb < p.num_microbatches(); ++mb) {
            for (int vs = 0; vs < p.pp * p.vpp; ++vs) {
              const std::int64_t id = pipeline_transfer_id(p, tp, cp, dp, kind, mb, vs);
              EXPECT_GE(id, 0);
              ids.insert(id);
              ++n;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(static_cast<int>(ids.size()), n);
  EXPECT_EQ(n, 2 * 2 * 3 * 2 * 4 * 4);
}

}  // namespace
}  // namespace strata::rt
