// The plan executor: one rank of a real training run of the plan. It builds the
// rank's TP/DP/PP groups, holds its shard of a transformer (param_layout.h),
// and runs each step as the shared schedule generator says
// (plan/pipeline_schedule.h, the same program the simulator costs):
// forwards and backwards of micro-batches through its model chunks, pipeline
// sends and receives between them, data-parallel gradient reduction and the
// (ZeRO-sharded) Adam step. Everything it runs is timed into a Recorder.
//
// Every public call that is marked collective must be made by every rank of the
// world, in the same order. Failures of peers surface as CommError from the
// communicators' timeouts; the caller decides how the job ends.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/executor/recorder.h"
#include "runtime/executor/run_config.h"
#include "runtime/comm/process_groups.h"

namespace strata::rt {

struct StepResult {
  double step_time_s = 0.0;  // from the step's start barrier to its end barrier
  double loss = 0.0;         // mean token loss over the global batch (every rank has it)
  double grad_norm = 0.0;    // global L2 norm of the gradient (before the update)
  // MoE models: the busiest expert-parallel rank's routed rows over the mean,
  // averaged over the step's MoE layer forwards on every rank (0: dense).
  double expert_load = 0.0;
};

class Executor {
 public:
  // Collective over world. Throws InputError (file: the run config) when the
  // world's size is not the plan's.
  Executor(const RunConfig& config, Device& device, Communicator& world);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Runs one training step. Collective.
  StepResult step();
  // Waits for whatever is still in flight (parameter gathers). Collective.
  void finish();

  const RankCoord& coord() const;
  Recorder& recorder();
  // Device memory allocated at the peak since the parameters were set up
  // (parameters, gradients, optimizer state and each step's working memory).
  std::int64_t peak_memory_bytes() const;

  // Every parameter of the whole model by global name (param_layout.h), as
  // this plan's shards hold it now. Collective; every rank gets all of them.
  std::map<std::string, std::vector<float>> full_parameters();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::rt
