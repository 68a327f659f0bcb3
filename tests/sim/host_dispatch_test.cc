// Host dispatch (issue 23): with eager PyTorch the host issues every kernel, and
// small kernels run at the host's pace; against schedules computed by hand.
//
// One GPU, the small GPT, every compute op d (UniformCosts), no communication. A
// step of K kernels (the forward and backward ops, then the gradient norm's pass
// and the optimizer's update) takes
// K d without host dispatch; that run gives K. With a host cost h per kernel:
//  - dispatch-bound (h > d): the host issues kernel i at i h and the GPU, always
//    waiting, runs it at once, so the step is K h + d; the GPU idles h before the
//    first kernel and h - d before each other: K (h - d) + d;
//  - GPU-bound (h < d): only the first kernel's issue shows, so the step is K d + h.
// An exact queue (kernel i starts at max(end of i-1, i h)) gives the same two
// figures; the model's approximation (a task waits for its first kernel's issue,
// the next task for the rest) is exact at both ends.
#include <gtest/gtest.h>

#include "core/error.h"
#include "costmodel/framework_profile.h"
#include "fake_costs.h"
#include "test_models.h"
#include "sim/engine/engine.h"
#include "sim/metrics.h"
#include "sim/workload/workload.h"

namespace strata::sim {
namespace {

using testing::AlphaBetaComm;
using testing::FreeComm;
using testing::UniformCosts;

constexpr TimeNs kOpNs = 10'000;  // d: 10 us per kernel

PlanSpec one_gpu() {
  PlanSpec p;
  p.dp = 1;
  p.micro_batch_size = 1;
  p.global_batch_size = 1;
  return p;
}

WorkloadOptions dispatch(double per_kernel_us) {
  WorkloadOptions o;
  o.host_dispatch = HostDispatch{DispatchMode::kEager, per_kernel_us, "test"};
  return o;
}

struct Step {
  TimeNs time = 0;
  double host_s = 0.0;
  int host_tasks = 0;
};

Step run(const ModelSpec& m, const PlanSpec& p, const CommCosts& comm, Fidelity f, const WorkloadOptions& o) {
  const UniformCosts costs(kOpNs);
  Workload w = build_workload(m, p, costs, comm, f, o);
  const RunResult r = run_task_graph(w.graph, nullptr);
  Step s;
  s.time = r.makespan_ns;
  s.host_s = step_metrics(w, r).host_s;
  s.host_tasks = static_cast<int>(w.stream(0, StreamKind::kHost).size());
  return s;
}

// K, from the step without host dispatch.
std::int64_t kernels_per_step(const ModelSpec& m) {
  const Step s = run(m, one_gpu(), FreeComm(), Fidelity::kFull, {});
  EXPECT_EQ(s.time % kOpNs, 0);
  EXPECT_EQ(s.host_tasks, 0);  // no host lane work without a dispatch cost
  return s.time / kOpNs;
}

TEST(HostDispatch, DispatchBoundSmallKernelsRunAtTheHostsPace) {
  const ModelSpec m = strata::testing::small_gpt(4);
  const std::int64_t k = kernels_per_step(m);
  ASSERT_GT(k, 50);  // 4 layers of a dozen ops forward and more backward
  const double h_us = 25.0;  // h = 2.5 d
  const TimeNs h = 25'000;
  for (Fidelity f : {Fidelity::kFull, Fidelity::kFolded}) {
    const Step s = run(m, one_gpu(), FreeComm(), f, dispatch(h_us));
    EXPECT_EQ(s.time, k * h + kOpNs) << to_string(f);
    EXPECT_NEAR(s.host_s, ns_to_seconds(k * (h - kOpNs) + kOpNs), 1e-9) << to_string(f);
  }
}

TEST(HostDispatch, GpuBoundKernelsHideTheHostBehindTheFirstIssue) {
  const ModelSpec m = strata::testing::small_gpt(4);
  const std::int64_t k = kernels_per_step(m);
  const TimeNs h = 2'000;  // h = d / 5
  for (Fidelity f : {Fidelity::kFull, Fidelity::kFolded}) {
    const Step s = run(m, one_gpu(), FreeComm(), f, dispatch(2.0));
    EXPECT_EQ(s.time, k * kOpNs + h) << to_string(f);
    EXPECT_NEAR(s.host_s, ns_to_seconds(h), 1e-9) << to_string(f);
  }
}

// A collective is issued by the host after the kernels before it: in a
// dispatch-bound step the last gradient all-reduce cannot start before the host
// has issued the whole backward. dp 2, every collective c = 100 us: the host
// issues the K - 2 forward and backward kernels by (K - 2) h, the last runs d,
// then the gradient all-reduce, the gradient norm's pass (d) and all-reduce, and
// the optimizer (d; both issued long before): (K - 2) h + 3 d + 2 c. Folded collapses the backward into
// one task, which may end before the host has issued its last kernel: the
// all-reduce then starts up to one kernel (d) early, never late.
TEST(HostDispatch, CollectivesWaitForTheHostToIssueTheKernelsBeforeThem) {
  const ModelSpec m = strata::testing::small_gpt(4);
  PlanSpec p = one_gpu();
  p.dp = 2;
  p.global_batch_size = 2;
  const std::int64_t k = kernels_per_step(m);
  const TimeNs h = 25'000;
  const TimeNs c = 100'000;
  const AlphaBetaComm comm(c, 1e30);  // no links; the bytes take (almost) no time
  const Step full = run(m, p, comm, Fidelity::kFull, dispatch(25.0));
  const Step folded = run(m, p, comm, Fidelity::kFolded, dispatch(25.0));
  const TimeNs expected = (k - 2) * h + 3 * kOpNs + 2 * c;
  EXPECT_NEAR(static_cast<double>(full.time), static_cast<double>(expected), 10.0);  // ns: bytes over 1e30 B/s
  EXPECT_LE(folded.time, full.time);
  EXPECT_GE(folded.time, full.time - kOpNs);
}

TEST(HostDispatch, ProfilesReadTheirDispatchCostStrictly) {
  const FrameworkProfile fsdp2 = load_framework_profile("pytorch-fsdp2");
  ASSERT_TRUE(fsdp2.host_dispatch);
  EXPECT_EQ(fsdp2.host_dispatch->mode, DispatchMode::kEager);
  EXPECT_DOUBLE_EQ(fsdp2.host_dispatch->per_kernel_us, 8.0);  // Torch-FL PR 27's A100 submit rate
  EXPECT_FALSE(load_framework_profile("maxtext").host_dispatch);         // XLA issues from C++
  EXPECT_FALSE(load_framework_profile("strata-runtime").host_dispatch);  // no measurement yet
  const auto profile = [](const char* dispatch) {
    return nlohmann::json::parse(std::string(R"({"name": "f", "description": "d", "source": "s", "host_dispatch": )") +
                                 dispatch + "}");
  };
  try {
    read_framework_profile(profile(R"({"mode": "lazy", "per_kernel_us": 8, "source": "s"})"), "f.json");
    FAIL() << "an unknown mode";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "f.json");
    EXPECT_EQ(e.json_path(), "$.host_dispatch.mode");
  }
  try {
    read_framework_profile(profile(R"({"mode": "eager", "per_kernel_us": -1, "source": "s"})"), "f.json");
    FAIL() << "a negative cost";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "$.host_dispatch.per_kernel_us");
  }
  try {
    read_framework_profile(profile(R"({"mode": "eager", "per_kernel_us": 8})"), "f.json");
    FAIL() << "no source";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "$.host_dispatch.source");
  }
}

}  // namespace
}  // namespace strata::sim
