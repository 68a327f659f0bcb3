#include "runtime/executor/parameter_store.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "runtime/device/random.h"

namespace strata::rt {
namespace {

// FNV-1a (Fowler, Noll, Vo), 64-bit: a parameter's name -> its random stream,
// so a parameter gets the same values on every rank and in every plan.
std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ull;  // FNV offset basis
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;  // FNV prime
  }
  return h;
}

enum InFlightKind { kReduce = 0, kGather = 1, kGradScatter = 2, kWeightGather = 3 };

}  // namespace

struct ParameterStore::BucketState {
  Tensor weights;      // ZeRO 0-2: [padded]; ZeRO-3: this rank's shard
  Tensor grads;        // ZeRO 0-1: fp32 [padded]; ZeRO-2: the same while backward fills it
  Tensor master;       // fp32 optimizer view of the weights, with 16-bit weights
  Tensor exp_avg;      // fp32, the optimizer's elements
  Tensor exp_avg_sq;
  Tensor grad_shard;   // ZeRO 2/3: fp32 [shard], summed over micro-batches
  bool reduced = false;  // this step's reduction started (ZeRO 0/1)
  int ready_units = 0;   // units done in the current backward op
  // ZeRO-3 transient full weights and gradients.
  Tensor full_weights;
  bool weights_resident = false;
  bool weights_gathering = false;
  int weight_refs = 0;
  Tensor full_grads;
  int grad_refs = 0;
};

struct ParameterStore::InFlight {
  std::unique_ptr<Request> request;
  int bucket = -1;
  int kind = kReduce;
  std::string name;
  EventCategory category = EventCategory::kDp;
  double bytes = 0.0;
  TimeNs start_ns = 0;
  EventContext context;
  std::function<void()> on_done;
  Tensor keep_alive;  // a transient buffer the operation uses
  std::uint64_t reduction = 0;  // a reduce-scatter's number (track_reduce_scatter), 0 otherwise
};

// A reduce-scatter's shard waiting for its all-reduce across the shard groups.
struct ParameterStore::AcrossPending {
  std::uint64_t reduction = 0;  // the reduce-scatter's number
  bool scattered = false;       // the reduce-scatter is done
  int bucket = -1;
  int kind = kReduce;
  TensorView shard;
  Tensor keep_alive;  // the buffer shard lives in, until the all-reduce is done
  EventContext context;
  std::function<void()> then;
};

ParameterStore::ParameterStore(Device& device, const ParamLayout& layout, const StoreOptions& options,
                               const RankCoord& coord, Communicator& tp, Communicator& dp,
                               Communicator* embedding, Recorder& recorder, Communicator* across,
                               Communicator* expert_dp)
    : device_(device), layout_(layout), options_(options), coord_(coord), tp_(tp), dp_(dp),
      embedding_(embedding), recorder_(recorder), across_(across), expert_dp_(expert_dp) {
  if (across_ != nullptr && across_->size() == 1) across_ = nullptr;
  for (const Bucket& b : layout_.buckets) {
    if (b.expert && expert_dp_ == nullptr) throw InternalError("ParameterStore: expert buckets need the expert group");
    if (b.expert && across_ != nullptr) throw InternalError("ParameterStore: expert buckets with hybrid sharding");
  }
  const bool replicated = dp_.size() > 1 || across_ != nullptr || (expert_dp_ != nullptr && expert_dp_->size() > 1);
  zero_ = replicated ? options.zero_stage : 0;
  master_copy_ = device.storage_dtype(options.dtype) != DType::kFp32;
  initialize();
}

ParameterStore::~ParameterStore() {
  try {
    wait_all();
  } catch (const std::exception&) {
    // A failed collective is reported where it was waited on; the job is ending.
  }
}

Communicator& ParameterStore::group_of(int bucket) const {
  return layout_.buckets[bucket].expert ? *expert_dp_ : dp_;
}

TensorView ParameterStore::shard_of(const TensorView& full, int bucket) const {
  const Communicator& group = group_of(bucket);
  const std::int64_t shard = layout_.buckets[bucket].shard_numel(group.size());
  return full.slice(group.rank() * shard, shard);
}

void ParameterStore::initialize() {
  const DType dtype = options_.dtype;
  for (int b = 0; b < static_cast<int>(layout_.buckets.size()); ++b) {
    const Bucket& bucket = layout_.buckets[b];
    auto state = std::make_unique<BucketState>();
    Tensor init = device_.allocate_tensor(bucket.padded_numel, DType::kFp32);
    device_.fill(init.view(), 0.0f);
    for (int u : bucket.units) {
      const Unit& unit = layout_.units[u];
      for (const ParamSpec& s : unit.params) {
        const TensorView v = init.view().slice(unit.bucket_offset + s.offset, s.numel());
        if (s.init == ParamInit::kOnes) {
          device_.fill(v, 1.0f);
        } else if (s.init == ParamInit::kUniform) {
          const std::uint64_t seed = splitmix64(options_.seed ^ fnv1a(s.name));
          for (const ParamSpec::Piece& p : s.pieces) {
            device_.fill_random(v.slice(p.local_row * s.cols, p.rows * s.cols), seed,
                                static_cast<std::uint64_t>(p.global_row * s.cols), -s.init_range, s.init_range);
          }
        }
      }
    }
    const TensorView own = shard_of(init.view(), b);
    const std::int64_t shard = own.numel;
    const TensorView opt_source = zero_ >= 1 ? own : init.view();
    if (zero_ == 3) {
      state->weights = device_.allocate_tensor(shard, dtype);
      device_.convert(own, state->weights.view());
    } else {
      state->weights = device_.allocate_tensor(bucket.padded_numel, dtype);
      device_.convert(init.view(), state->weights.view());
      if (zero_ < 2) {  // ZeRO-2 allocates a bucket's gradient when backward first writes it
        state->grads = device_.allocate_tensor(bucket.padded_numel, DType::kFp32);
        device_.fill(state->grads.view(), 0.0f);
      }
    }
    if (master_copy_) {
      state->master = device_.allocate_tensor(opt_source.numel, DType::kFp32);
      device_.convert(opt_source, state->master.view());
    }
    state->exp_avg = device_.allocate_tensor(opt_source.numel, DType::kFp32);
    state->exp_avg_sq = device_.allocate_tensor(opt_source.numel, DType::kFp32);
    device_.fill(state->exp_avg.view(), 0.0f);
    device_.fill(state->exp_avg_sq.view(), 0.0f);
    if (zero_ >= 2) {
      state->grad_shard = device_.allocate_tensor(shard, DType::kFp32);
      device_.fill(state->grad_shard.view(), 0.0f);
    }
    buckets_.push_back(std::move(state));
  }
  device_.synchronize();
}

void ParameterStore::track(std::unique_ptr<Request> request, std::string name, EventCategory category,
                           double bytes, std::function<void()> on_done) {
  auto f = std::make_unique<InFlight>();
  f->request = std::move(request);
  f->name = std::move(name);
  f->category = category;
  f->bytes = bytes;
  f->start_ns = recorder_.now_ns();
  f->context = recorder_.context();
  f->on_done = std::move(on_done);
  in_flight_.push_back(std::move(f));
}

void ParameterStore::pump() {
  for (std::size_t i = 0; i < in_flight_.size();) {
    InFlight& f = *in_flight_[i];
    if (!f.request->test()) {
      ++i;
      continue;
    }
    recorder_.add(f.name, f.category, Lane::kDpComm, f.bytes, f.start_ns, recorder_.now_ns(), f.context);
    std::unique_ptr<InFlight> done = std::move(in_flight_[i]);
    in_flight_.erase(in_flight_.begin() + static_cast<std::ptrdiff_t>(i));
    if (done->on_done) done->on_done();
  }
}

namespace {
// Waits for the in-flight operations matching pred, oldest first, and finishes them.
template <typename Pred, typename List, typename Finish>
void complete_matching(List& list, Pred pred, Finish finish) {
  for (std::size_t i = 0; i < list.size();) {
    if (!pred(*list[i])) {
      ++i;
      continue;
    }
    list[i]->request->wait();
    auto done = std::move(list[i]);
    list.erase(list.begin() + static_cast<std::ptrdiff_t>(i));
    finish(*done);
  }
}
}  // namespace

void ParameterStore::wait_all() {
  complete_matching(
      in_flight_, [](const InFlight&) { return true; },
      [this](InFlight& f) {
        recorder_.add(f.name, f.category, Lane::kDpComm, f.bytes, f.start_ns, recorder_.now_ns(), f.context);
        if (f.on_done) f.on_done();
      });
}

void ParameterStore::wait_gather(int bucket) {
  complete_matching(
      in_flight_, [&](const InFlight& f) { return f.bucket == bucket && (f.kind == kGather || f.kind == kWeightGather); },
      [this](InFlight& f) {
        recorder_.add(f.name, f.category, Lane::kDpComm, f.bytes, f.start_ns, recorder_.now_ns(), f.context);
        if (f.on_done) f.on_done();
      });
}

void ParameterStore::prefetch_weights(int unit) {
  if (zero_ != 3 || !options_.overlap_param_gather) return;
  const int b = layout_.units[unit].bucket;
  BucketState& s = *buckets_[b];
  if (s.weights_resident || s.weights_gathering) return;
  const Bucket& bucket = layout_.buckets[b];
  s.full_weights = device_.allocate_tensor(bucket.padded_numel, options_.dtype);
  const TensorView own = shard_of(s.full_weights.view(), b);
  device_.copy_on_device(s.weights.view().data, own.data, static_cast<std::size_t>(own.bytes()));
  s.weights_gathering = true;
  auto request = group_of(b).start_all_gather(own, s.full_weights.view());
  track(std::move(request), "param all_gather", EventCategory::kZero, static_cast<double>(s.full_weights.view().bytes()),
        [&s] {
          s.weights_gathering = false;
          s.weights_resident = true;
        });
  in_flight_.back()->bucket = b;
  in_flight_.back()->kind = kWeightGather;
}

TensorView ParameterStore::acquire_weights(int unit) {
  const Unit& u = layout_.units[unit];
  const int b = u.bucket;
  BucketState& s = *buckets_[b];
  if (zero_ != 3) {
    wait_gather(b);
    return s.weights.view().slice(u.bucket_offset, u.numel);
  }
  if (!s.weights_resident) {
    if (!s.weights_gathering) {
      // Not prefetched: gather now (the same collective, waited at once).
      const bool overlap = options_.overlap_param_gather;
      options_.overlap_param_gather = true;
      prefetch_weights(unit);
      options_.overlap_param_gather = overlap;
    }
    wait_gather(b);
  }
  ++s.weight_refs;
  return s.full_weights.view().slice(u.bucket_offset, u.numel);
}

void ParameterStore::release_weights(int unit) {
  if (zero_ != 3) return;
  BucketState& s = *buckets_[layout_.units[unit].bucket];
  if (--s.weight_refs > 0) return;
  s.weight_refs = 0;
  s.weights_resident = false;
  s.full_weights = Tensor();
}

TensorView ParameterStore::acquire_grads(int unit) {
  const Unit& u = layout_.units[unit];
  const int b = u.bucket;
  BucketState& s = *buckets_[b];
  if (zero_ == 3) {
    if (s.grad_refs++ == 0) {
      s.full_grads = device_.allocate_tensor(layout_.buckets[b].padded_numel, DType::kFp32);
      device_.fill(s.full_grads.view(), 0.0f);
    }
    return s.full_grads.view().slice(u.bucket_offset, u.numel);
  }
  if (zero_ == 2) {
    // The previous micro-batch's reduce-scatter of this bucket (and its all-reduce
    // across shard groups) must have finished and been summed into the shard
    // before gradients accumulate again, so the shard sums micro-batches in order.
    wait_reductions(b);
    if (s.grads.numel() == 0) allocate_zero2_grads(b);
  }
  return s.grads.view().slice(u.bucket_offset, u.numel);
}

void ParameterStore::sum_replicated_over_tp(const TensorView& bucket_grads, int bucket) {
  if (!options_.sequence_parallel || tp_.size() == 1) return;
  // Sequence parallelism splits the tokens over tp, so each tp rank holds a
  // partial gradient of the replicated parameters (norms, row-parallel biases,
  // positions): Megatron all-reduces them over tp before the data-parallel reduction.
  for (int u : layout_.buckets[bucket].units) {
    const Unit& unit = layout_.units[u];
    const std::int64_t n = unit.numel - unit.replicated_begin;
    if (n <= 0) continue;
    const TensorView v = bucket_grads.slice(unit.bucket_offset + unit.replicated_begin, n);
    const TimeNs start = recorder_.now_ns();
    tp_.all_reduce(v, v);
    recorder_.add("replicated grad all_reduce", EventCategory::kTp, Lane::kTpComm, static_cast<double>(v.bytes()),
                  start, recorder_.now_ns());
  }
}

void ParameterStore::release_grads(int unit) {
  if (zero_ != 3) return;
  const int b = layout_.units[unit].bucket;
  BucketState& s = *buckets_[b];
  if (--s.grad_refs > 0) return;
  s.grad_refs = 0;
  sum_replicated_over_tp(s.full_grads.view(), b);
  const TensorView full = s.full_grads.view();
  const TensorView own = shard_of(full, b);
  auto request = group_of(b).start_reduce_scatter(full, own);
  const TensorView shard = s.grad_shard.view();
  track_reduce_scatter(std::move(request), static_cast<double>(full.bytes()), b, kGradScatter, own,
                       std::move(s.full_grads), [this, own, shard] { device_.axpy(1.0f, own, shard); });
  s.full_grads = Tensor();
}

void ParameterStore::track_reduce_scatter(std::unique_ptr<Request> request, double bytes, int bucket, int kind,
                                          const TensorView& shard, Tensor keep_alive, std::function<void()> then) {
  if (across_ == nullptr) {
    track(std::move(request), "grad reduce_scatter", EventCategory::kDp, bytes, std::move(then));
    in_flight_.back()->bucket = bucket;
    in_flight_.back()->kind = kind;
    in_flight_.back()->keep_alive = std::move(keep_alive);
    return;
  }
  auto pending = std::make_unique<AcrossPending>();
  pending->reduction = ++next_reduction_;
  pending->bucket = bucket;
  pending->kind = kind;
  pending->shard = shard;
  pending->keep_alive = std::move(keep_alive);
  pending->context = recorder_.context();
  pending->then = std::move(then);
  AcrossPending* p = pending.get();
  across_pending_.push_back(std::move(pending));
  track(std::move(request), "grad reduce_scatter", EventCategory::kDp, bytes, [this, p] {
    p->scattered = true;
    start_ready_across();
  });
  in_flight_.back()->bucket = bucket;
  in_flight_.back()->kind = kind;
  in_flight_.back()->reduction = p->reduction;
}

void ParameterStore::start_ready_across() {
  while (!across_pending_.empty() && across_pending_.front()->scattered) {
    std::unique_ptr<AcrossPending> p = std::move(across_pending_.front());
    across_pending_.pop_front();
    const EventContext context = recorder_.context();
    recorder_.context() = p->context;
    track(across_->start_all_reduce(p->shard, p->shard, ReduceOp::kSum), "grad all_reduce across shard groups",
          EventCategory::kDp, static_cast<double>(p->shard.bytes()), std::move(p->then));
    recorder_.context() = context;
    in_flight_.back()->bucket = p->bucket;
    in_flight_.back()->kind = p->kind;
    in_flight_.back()->keep_alive = std::move(p->keep_alive);
  }
}

void ParameterStore::wait_reductions(int bucket) {
  auto finish = [this](InFlight& f) {
    recorder_.add(f.name, f.category, Lane::kDpComm, f.bytes, f.start_ns, recorder_.now_ns(), f.context);
    if (f.on_done) f.on_done();
  };
  // Until none of the bucket's shards waits: finish the oldest pending
  // reduce-scatter, which starts the across all-reduces that are ready.
  auto waiting = [&] {
    return std::any_of(across_pending_.begin(), across_pending_.end(),
                       [&](const auto& p) { return p->bucket == bucket; });
  };
  while (waiting()) {
    const std::uint64_t oldest = across_pending_.front()->reduction;
    complete_matching(in_flight_, [&](const InFlight& f) { return f.reduction == oldest; }, finish);
  }
  complete_matching(
      in_flight_, [&](const InFlight& f) { return f.bucket == bucket && (f.kind == kReduce || f.kind == kGradScatter); },
      finish);
}

void ParameterStore::start_reduction(int b) {
  BucketState& s = *buckets_[b];
  if (zero_ == 2 && s.grads.numel() == 0) allocate_zero2_grads(b);  // nothing written: reduce zeros alike
  const TensorView grads = s.grads.view();
  sum_replicated_over_tp(grads, b);
  s.reduced = true;
  Communicator& group = group_of(b);
  if (group.size() == 1 && across_ == nullptr) {
    // Nothing to reduce (an expert bucket whose expert data-parallel group is this
    // rank alone); ZeRO-2 still moves the micro-batch's gradient into its shard,
    // which is the whole bucket, and frees the bucket as after a reduce-scatter.
    if (zero_ == 2) {
      device_.axpy(1.0f, grads, s.grad_shard.view());
      s.grads = Tensor();
    }
    return;
  }
  const double bytes = static_cast<double>(grads.bytes());
  if (zero_ == 0) {
    track(group.start_all_reduce(grads, grads, ReduceOp::kSum), "grad all_reduce", EventCategory::kDp, bytes, {});
  } else {
    const TensorView own = shard_of(grads, b);
    std::function<void()> done;
    if (zero_ == 2) {
      const TensorView shard = s.grad_shard.view();
      done = [this, own, shard] { device_.axpy(1.0f, own, shard); };
    }
    // ZeRO-2 keeps only the shard: the full bucket lives until its reduce-scatter
    // (and across all-reduce) is done, and the next micro-batch's backward
    // allocates a fresh one.
    Tensor keep_alive;
    if (zero_ == 2) {
      keep_alive = std::move(s.grads);
      s.grads = Tensor();  // a moved-from Tensor keeps its size
    }
    track_reduce_scatter(group.start_reduce_scatter(grads, own), bytes, b, kReduce, own, std::move(keep_alive),
                         std::move(done));
    return;
  }
  in_flight_.back()->bucket = b;
  in_flight_.back()->kind = kReduce;
}

void ParameterStore::unit_backward_done(int unit, bool last) {
  const int b = layout_.units[unit].bucket;
  BucketState& s = *buckets_[b];
  if (++s.ready_units < static_cast<int>(layout_.buckets[b].units.size())) return;
  s.ready_units = 0;
  if (zero_ == 3 || !options_.overlap_grad_reduce) return;
  if (zero_ == 2 || last) start_reduction(b);
}

void ParameterStore::backward_op_done(int chunk, bool last) {
  (void)last;
  if (zero_ != 2 || options_.overlap_grad_reduce) return;
  for (int b = 0; b < static_cast<int>(layout_.buckets.size()); ++b) {
    if (layout_.buckets[b].chunk == chunk) start_reduction(b);
  }
}

void ParameterStore::allocate_zero2_grads(int bucket) {
  BucketState& s = *buckets_[bucket];
  s.grads = device_.allocate_tensor(layout_.buckets[bucket].padded_numel, DType::kFp32);
  device_.fill(s.grads.view(), 0.0f);
}

void ParameterStore::begin_step() {
  for (auto& s : buckets_) {
    if (zero_ < 2) device_.fill(s->grads.view(), 0.0f);
    if (zero_ >= 2) device_.fill(s->grad_shard.view(), 0.0f);
    s->reduced = false;
    s->ready_units = 0;
  }
}

void ParameterStore::finish_reductions() {
  for (int b = 0; b < static_cast<int>(layout_.buckets.size()); ++b) {
    if ((zero_ == 0 || zero_ == 1) && !buckets_[b]->reduced) start_reduction(b);
  }
  wait_all();
  // (wait_all has also finished hybrid sharding's all-reduces across the shard
  // groups: each started as soon as its reduce-scatter was done.)
  // The tied word embedding: its gradient is the sum of the first stage's
  // (lookup) and the last stage's (output layer) parts (Megatron's embedding group).
  // ZeRO-0 sums the embedding's range of its bucket; with ZeRO >= 1 the embedding
  // is a bucket of its own (plan/bucket_plan.h) and each rank sums its shard.
  for (int b = 0; b < static_cast<int>(layout_.buckets.size()); ++b) {
    if (!layout_.buckets[b].embedding_sync || embedding_ == nullptr || embedding_->size() == 1) continue;
    BucketState& s = *buckets_[b];
    std::vector<TensorView> views;
    if (zero_ == 0) {
      for (int u : layout_.buckets[b].units) {
        const Unit& unit = layout_.units[u];
        if (unit.shared_embedding) views.push_back(s.grads.view().slice(unit.bucket_offset, unit.numel));
      }
    } else {
      views.push_back(zero_ == 1 ? shard_of(s.grads.view(), b) : s.grad_shard.view());
    }
    for (const TensorView& v : views) {
      const TimeNs start = recorder_.now_ns();
      embedding_->all_reduce(v, v);
      recorder_.add("embedding grad all_reduce", EventCategory::kDp, Lane::kDpComm, static_cast<double>(v.bytes()),
                    start, recorder_.now_ns());
    }
  }
}

void ParameterStore::add_grad_norm_squares(const TensorView& acc, const TensorView& tmp) {
  if (across_ != nullptr && across_->rank() != 0) return;  // the same shard is counted once
  for (int b = 0; b < static_cast<int>(layout_.buckets.size()); ++b) {
    const Bucket& bucket = layout_.buckets[b];
    const Communicator& group = group_of(b);
    if (zero_ == 0 && group.rank() != 0) continue;  // the group's rank 0 counts the replicated gradients
    BucketState& s = *buckets_[b];
    const std::int64_t shard = bucket.shard_numel(group.size());
    const std::int64_t begin = zero_ >= 1 ? group.rank() * shard : 0;
    const std::int64_t end = zero_ >= 1 ? begin + shard : bucket.padded_numel;
    const TensorView grads = zero_ == 0 ? s.grads.view() : zero_ == 1 ? shard_of(s.grads.view(), b) : s.grad_shard.view();
    for (int u : bucket.units) {
      const Unit& unit = layout_.units[u];
      for (const ParamSpec& p : unit.params) {
        if (p.tied_copy || (p.replicated && coord_.tp != 0)) continue;
        const std::int64_t lo = std::max(begin, unit.bucket_offset + p.offset);
        const std::int64_t hi = std::min(end, unit.bucket_offset + p.offset + p.numel());
        if (lo >= hi) continue;
        device_.sum_squares(grads.slice(lo - begin, hi - lo), tmp);
        device_.axpy(1.0f, tmp, acc);
      }
    }
  }
}

void ParameterStore::optimizer_step(std::int64_t step) {
  recorder_.compute("optimizer step", EventCategory::kOptimizer, 0.0, 0.0, [&] {
    for (int b = 0; b < static_cast<int>(layout_.buckets.size()); ++b) {
      BucketState& s = *buckets_[b];
      const TensorView grads = zero_ == 0 ? s.grads.view() : zero_ == 1 ? shard_of(s.grads.view(), b) : s.grad_shard.view();
      const TensorView weights = zero_ == 0 || zero_ == 3 ? s.weights.view() : shard_of(s.weights.view(), b);
      const TensorView param = master_copy_ ? s.master.view() : weights;
      device_.adam_step(param, grads, s.exp_avg.view(), s.exp_avg_sq.view(), options_.adam, step);
      if (master_copy_) device_.convert(param, weights);
    }
  });
  if (zero_ != 1 && zero_ != 2) return;
  // Megatron's distributed optimizer: every rank updated its shard; gather the rest.
  for (int b = 0; b < static_cast<int>(layout_.buckets.size()); ++b) {
    const TensorView full = buckets_[b]->weights.view();
    track(group_of(b).start_all_gather(shard_of(full, b), full), "param all_gather", EventCategory::kZero,
          static_cast<double>(full.bytes()), {});
    in_flight_.back()->bucket = b;
    in_flight_.back()->kind = kGather;
    if (!options_.overlap_param_gather) wait_gather(b);
  }
}

}  // namespace strata::rt
