// What `strata run` writes: measured.json (step times, loss, gradient norm,
// per-rank peak memory, in the prediction's units) and the measured trace, in
// the simulator's trace.json form with otherData.strata.kind = "measured"
// (docs/formats.md), so strata-gui and Perfetto show both side by side.
#pragma once

#include "core/progress.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/executor/executor.h"
#include "runtime/executor/run_config.h"

namespace strata::rt {

inline constexpr const char* kMeasuredSchema = "strata-measured/1";

struct RankReport {
  int rank = 0;
  std::string name;                  // "node 0 gpu 1 (rank 1: tp 1 dp 0 pp 0)"
  std::int64_t peak_memory_bytes = 0;
  std::string events;                // trace events of the traced step, comma-separated JSON objects
};

struct MeasuredRun {
  std::vector<StepResult> steps;
  std::vector<RankReport> ranks;     // every rank, by rank
  std::string backend;               // "cpu" | "cuda"
  std::string device_name;
  std::string transport;             // "mpi" | "nccl" | "self"
  int threads_per_rank = 1;
  std::vector<std::string> notes;    // what the run did differently from the plan, and why
};

// Runs config.training.steps steps on this rank and gathers every rank's report.
// Collective over world. progress(steps done, of, "steps") is called after each
// step (may be empty); its answer is not a request to stop, since ranks must stop
// together. Throws what the executor throws.
MeasuredRun run_training(const RunConfig& config, Device& device, Communicator& world,
                         const ProgressFn& progress);

// The median step time of the timed steps (after the warm-up).
double median_step_time_s(const RunConfig& config, const MeasuredRun& run);
// MoE models: StepResult::expert_load averaged over the timed steps (0: dense).
double mean_expert_load(const RunConfig& config, const MeasuredRun& run);
// Peak memory per pipeline stage: the most any rank of the stage allocated.
std::vector<std::int64_t> peak_memory_per_stage(const RunConfig& config, const MeasuredRun& run);

// What the runtime does not run as the plan says (dropout, rotary positions,
// fused attention, 16-bit storage on cpu), each with why.
std::vector<std::string> runtime_notes(const RunConfig& config, const Device& device);

nlohmann::ordered_json measured_json(const RunConfig& config, const MeasuredRun& run);
std::string measured_trace_json(const RunConfig& config, const MeasuredRun& run);

// This rank's events of the recorder's last step as trace events (pid = rank, tid =
// lane; events of a lane in flight together on further tracks, tid lane +
// k * kNumLanes, each named by a thread_name event).
std::string trace_events_json(const Recorder& recorder, int rank);

}  // namespace strata::rt
