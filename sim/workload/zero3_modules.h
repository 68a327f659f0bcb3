// ZeRO-3 gathered per module, as DeepSpeed's stage 3 does it (the framework's
// module_gather): the tasks of the gathers module_gathers.h plans at each module
// hook, and of the gradient reductions of DeepSpeed's reduce buckets.
//
// Each parameter at or above the persistence threshold is one all-gather over
// the shard group, issued at the hook the plan names; the module's first task
// waits for its own gathers and, where the hook waits, for every gather in
// flight. With `synchronize` (DeepSpeed before 2021-10) every gather first waits
// for all the GPU's work issued before its hook (torch.cuda.synchronize), so a
// gather overlaps only the compute issued after it, and the host, blocked in
// each gather's synchronize, issues the module's compute only once every gather
// of the hook but the last has finished. With `copy_per_rank`, each gather is
// followed, and each reduce-scatter preceded, by one copy kernel per rank of
// the group on the same stream (PyTorch's list-based all_gather/reduce_scatter),
// and with `copy_issue_us` the host spends that long issuing each copy before it
// issues the next module's kernels (the gathers' at its hook, the reduce-scatters'
// since the hook before); after a synchronize it has no lead left to hide that in.
//
// Gradients: every parameter of the layer (persistent ones too) is reduce-
// scattered on its own; parameters are collected in backward order into
// buckets of reduce_bucket_elements, a bucket reduced when the next gradient
// would overflow it (costed from the end of the module that overflowed it) or
// at the end of the micro-batch's backward.
//
// Only the layers' modules are gathered this way; the embedding and the head
// are not modelled as gathered (as with layer granularity). pp must be 1
// (DeepSpeed's ZeRO-3 does not run with pipeline parallelism: the scenario
// refuses it).
#pragma once

#include <functional>
#include <vector>

#include "sim/workload/build.h"

namespace strata::sim {

// The collectives the data-parallel pass places on the shard groups, per member
// of one (tensor rank, stage)'s replicas.
struct Zero3Collectives {
  // One all-gather of `bytes` per shard group, labelled `label`; each member's task.
  std::function<std::vector<TaskId>(double bytes, std::int32_t label, const TaskInfo& info)> gather;
  // A gradient reduction of `bytes` per shard group (with hybrid sharding, then
  // across the groups) after each member's ready(i) task; each member's last task.
  std::function<std::vector<TaskId>(double bytes, const TaskInfo& info, const std::function<TaskId(std::size_t)>& ready)>
      reduce;
  // The shard group's size (the ranks a list-based collective copies a chunk for).
  int group_size = 1;
  // The lane the reductions run on.
  StreamKind reduce_lane = StreamKind::kDpReduce;
};

// Adds stage r's per-module gathers and reductions for the simulated `members`
// (their replica order, as the collectives return tasks); sets last_dp of each
// member to its last reduction.
void add_zero3_by_module(WorkloadBuild& b, int r, const std::vector<int>& members, const Zero3Collectives& c,
                         std::vector<TaskId>& last_dp);

}  // namespace strata::sim
