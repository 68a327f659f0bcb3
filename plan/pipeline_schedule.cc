#include "plan/pipeline_schedule.h"

#include <algorithm>

namespace strata {
namespace {

std::vector<PipelineOp> gpipe(int microbatches) {
  std::vector<PipelineOp> ops;
  for (int mb = 0; mb < microbatches; ++mb) ops.push_back({PipelinePhase::kForward, mb, 0});
  for (int mb = microbatches - 1; mb >= 0; --mb) ops.push_back({PipelinePhase::kBackward, mb, 0});
  return ops;
}

std::vector<PipelineOp> one_f_one_b(int pp, int microbatches, int rank) {
  const int warmup = std::min(pp - rank - 1, microbatches);
  std::vector<PipelineOp> ops;
  int next_forward = 0;
  int next_backward = 0;
  for (int i = 0; i < warmup; ++i) ops.push_back({PipelinePhase::kForward, next_forward++, 0});
  while (next_forward < microbatches) {
    ops.push_back({PipelinePhase::kForward, next_forward++, 0});
    ops.push_back({PipelinePhase::kBackward, next_backward++, 0});
  }
  while (next_backward < microbatches) ops.push_back({PipelinePhase::kBackward, next_backward++, 0});
  return ops;
}

// Megatron-LM's interleaved schedule. Virtual micro-batch k (0 .. m*vpp-1) maps to a
// chunk and a micro-batch: within each group of pp*vpp, pp consecutive virtual
// micro-batches run on one chunk; backward walks the chunks in reverse.
PipelineOp interleaved_op(int k, int pp, int vpp, bool forward) {
  const int group = pp * vpp;
  const int in_group = k % group;
  int chunk = in_group / pp;
  if (!forward) chunk = vpp - 1 - chunk;
  const int microbatch = (k / group) * pp + in_group % pp;
  return {forward ? PipelinePhase::kForward : PipelinePhase::kBackward, microbatch, chunk};
}

std::vector<PipelineOp> interleaved(int pp, int vpp, int microbatches, int rank) {
  const int total = microbatches * vpp;
  const int warmup = std::min((pp - rank - 1) * 2 + (vpp - 1) * pp, total);
  std::vector<PipelineOp> ops;
  int next_forward = 0;
  int next_backward = 0;
  for (int i = 0; i < warmup; ++i) ops.push_back(interleaved_op(next_forward++, pp, vpp, true));
  while (next_forward < total) {
    ops.push_back(interleaved_op(next_forward++, pp, vpp, true));
    ops.push_back(interleaved_op(next_backward++, pp, vpp, false));
  }
  while (next_backward < total) ops.push_back(interleaved_op(next_backward++, pp, vpp, false));
  return ops;
}

}  // namespace

std::vector<PipelineOp> pipeline_program(Schedule schedule, int pp, int vpp, int microbatches,
                                         int rank) {
  switch (schedule) {
    case Schedule::kGpipe: return gpipe(microbatches);
    case Schedule::kOneFOneB: return one_f_one_b(pp, microbatches, rank);
    case Schedule::kInterleaved: return interleaved(pp, vpp, microbatches, rank);
  }
  return {};
}

std::string to_string(const PipelineOp& op, int vpp) {
  std::string s = op.phase == PipelinePhase::kForward ? "F" : "B";
  s += std::to_string(op.microbatch);
  if (vpp > 1) {
    s += '.';
    s += std::to_string(op.chunk);
  }
  return s;
}

}  // namespace strata
