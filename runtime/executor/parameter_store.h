// One rank's parameters, gradients and optimizer state, and the data-parallel
// work on them: bucketed gradient reduction (all-reduce, or reduce-scatter with
// ZeRO), ZeRO-1/2/3 sharded Adam state, ZeRO-3 parameter gathers and the
// ZeRO-1/2 parameter all-gather after the step.
//
// What each ZeRO stage keeps (Rajbhandari et al. 2020; dp > 1, else stage 0):
//   0  full weights, full fp32 gradients, Adam state for all; gradients all-reduced.
//   1  full weights and gradients, Adam state for this rank's shard (Megatron's
//      distributed optimizer); gradients reduce-scattered once per step, the
//      updated shards all-gathered.
//   2  full weights; each micro-batch's gradients are reduce-scattered as soon as
//      its backward finishes a bucket, summed into a gradient shard, and the
//      full bucket freed: with overlap_grad_reduce at most the bucket being
//      filled and the one being reduced are whole at once.
//   3  only a shard of the weights; a unit's weights are all-gathered before
//      each forward and backward use and freed after, its gradients
//      reduce-scattered after each backward.
// Gradients are fp32 (Megatron's main_grad); with 16-bit weights an fp32 master
// copy of the optimizer's shard is kept and converted back after each update.
//
// Collectives on the dp group start in program order, which every data-parallel
// rank shares, so they match. Started reductions are driven by pump() (MPI
// progresses only inside MPI calls) and waited on before they are needed.
//
// Thread safety: one store per rank, used by that rank's thread.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/executor/param_layout.h"
#include "runtime/executor/recorder.h"
#include "runtime/comm/process_groups.h"

namespace strata::rt {

struct StoreOptions {
  int zero_stage = 0;
  bool overlap_grad_reduce = true;
  bool overlap_param_gather = true;
  bool sequence_parallel = false;
  DType dtype = DType::kFp32;  // training dtype (stored as the device stores it)
  std::uint64_t seed = 0;
  AdamParams adam;
};

class ParameterStore {
 public:
  // tp, dp, embedding: this rank's groups (embedding may be null: middle stages).
  // With hybrid sharding dp is the rank's ZeRO shard group and `across` the group of
  // the ranks holding the same shard in the other shard groups (null: plain ZeRO):
  // gradients are reduce-scattered within dp, then each shard all-reduced across,
  // as soon as its reduce-scatter is done (overlapped with the backward).
  // expert_dp: the expert data-parallel group, over which the routed experts'
  // buckets (Bucket::expert) are reduced and sharded (MoE models; else null).
  ParameterStore(Device& device, const ParamLayout& layout, const StoreOptions& options,
                 const RankCoord& coord, Communicator& tp, Communicator& dp, Communicator* embedding,
                 Recorder& recorder, Communicator* across = nullptr, Communicator* expert_dp = nullptr);
  ~ParameterStore();
  ParameterStore(const ParameterStore&) = delete;
  ParameterStore& operator=(const ParameterStore&) = delete;

  const ParamLayout& layout() const { return layout_; }
  int effective_zero_stage() const { return zero_; }

  // Weights of a unit, whole (compute dtype), valid until release_weights. ZeRO-3
  // gathers them (or takes a prefetched gather); ZeRO-1/2 waits for the
  // parameter all-gather still in flight from the last step.
  TensorView acquire_weights(int unit);
  void release_weights(int unit);
  // ZeRO-3 with overlap_param_gather: starts gathering a unit's weights now so a
  // later acquire finds them. No-op otherwise or when already there.
  void prefetch_weights(int unit);

  // The unit's fp32 gradient, accumulated into by backward, valid until release_grads.
  TensorView acquire_grads(int unit);
  // ZeRO-3: starts reduce-scattering the unit's gradient (freed once done).
  void release_grads(int unit);
  // Backward of `unit` in one backward op is done; last: the chunk's last
  // backward op of the step (its gradients are then final).
  void unit_backward_done(int unit, bool last);
  // A backward op of `chunk` finished (ZeRO-2 without overlap reduces here).
  void backward_op_done(int chunk, bool last);

  // Zeroes the gradients (start of a step).
  void begin_step();
  // Starts what is left of the gradient reductions, waits for all, sums the
  // tied embedding's gradient over the embedding group.
  void finish_reductions();
  // acc (fp32 scalar) += this rank's share of the squared gradient norm: every
  // parameter counted once over the world (tp-replicated ones on tp rank 0, the
  // tied copy not at all, ZeRO-0 gradients on the rank 0 of the bucket's
  // data-parallel group). tmp: an fp32 scalar.
  void add_grad_norm_squares(const TensorView& acc, const TensorView& tmp);
  // One AdamW step (step counts from 1), then the ZeRO-1/2 weight all-gather
  // (waited for now, or at first use with overlap_param_gather).
  void optimizer_step(std::int64_t step);
  // Drives started collectives; finishes what has completed.
  void pump();
  // Waits for every collective in flight (end of the run).
  void wait_all();

 private:
  struct BucketState;
  struct InFlight;

  void initialize();
  void start_reduction(int bucket);
  void sum_replicated_over_tp(const TensorView& bucket_grads, int bucket);
  void track(std::unique_ptr<Request> request, std::string name, EventCategory category, double bytes,
             std::function<void()> on_done);
  // A gradient reduce-scatter of `bucket` into `shard` (kind kReduce or kGradScatter),
  // then `then`. With hybrid sharding the shard is first all-reduced across the
  // shard groups, started as soon as the reduce-scatter is done and every earlier
  // one has started its own (so every rank of the across group starts them in the
  // same order), as the simulator's reduce_gradients has it.
  void track_reduce_scatter(std::unique_ptr<Request> request, double bytes, int bucket, int kind,
                            const TensorView& shard, Tensor keep_alive, std::function<void()> then);
  // Starts the across all-reduces whose reduce-scatters are done, oldest first.
  void start_ready_across();
  // Waits for bucket's reductions in flight, their across all-reduces included,
  // and finishes them in the order they started.
  void wait_reductions(int bucket);
  void allocate_zero2_grads(int bucket);
  void wait_gather(int bucket);
  TensorView shard_of(const TensorView& full, int bucket) const;
  // The group a bucket is reduced and sharded over: the replicas (or the shard
  // group with hybrid sharding), or the expert data-parallel group.
  Communicator& group_of(int bucket) const;

  Device& device_;
  const ParamLayout& layout_;
  StoreOptions options_;
  RankCoord coord_;
  Communicator& tp_;
  Communicator& dp_;
  Communicator* embedding_;
  Recorder& recorder_;
  Communicator* across_;  // hybrid sharding's group across the shard groups, or null
  Communicator* expert_dp_;  // the expert buckets' group, or null
  int zero_ = 0;
  bool master_copy_ = false;  // weights are stored in 16 bits: keep fp32 masters
  std::vector<std::unique_ptr<BucketState>> buckets_;
  std::vector<std::unique_ptr<InFlight>> in_flight_;
  struct AcrossPending;
  std::deque<std::unique_ptr<AcrossPending>> across_pending_;  // in reduce-scatter order
  std::uint64_t next_reduction_ = 0;
};

}  // namespace strata::rt
