#include "runtime/executor/executor.h"

#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "runtime/executor/context_parallel.h"
#include "runtime/executor/embedding_head.h"
#include "runtime/executor/kernels.h"
#include "runtime/executor/param_layout.h"
#include "runtime/executor/parameter_store.h"
#include "runtime/executor/pipeline_links.h"
#include "runtime/executor/synthetic_data.h"
#include "runtime/executor/transformer_layer.h"
#include "runtime/device/tensor_io.h"
#include "plan/pipeline_schedule.h"
#include "plan/pipeline_split.h"

namespace strata::rt {
namespace {

// What one micro-batch keeps on one model chunk between its forward and backward.
struct MicrobatchState {
  std::vector<LayerActivations> layers;
  HeadActivations head;
  IndexTensor ids;
};

// What a zero-bubble schedule's B leaves to its W, for one micro-batch on one
// model chunk: the weight-gradient GEMMs and what they need.
struct DeferredWeightGrads {
  std::vector<std::vector<LayerWgrad>> layers;  // by layer in the chunk
  DeferredWgrad head;                           // the output layer's (last stage)
};

struct PendingRecv {
  PipelineOp op;
  Tensor buffer;
  std::unique_ptr<Request> request;
};

struct PendingSend {
  std::unique_ptr<Request> request;
  Tensor buffer;
  TimeNs start_ns = 0;
  const char* name = "";
  EventContext context;
  double bytes = 0.0;
  std::int64_t transfer = -1;  // pipeline_transfer_id
};

// The groups of this rank, with the expert groups of an MoE model.
ProcessGroups checked_groups(const RunConfig& c, Communicator& world) {
  const RankLayout layout(c.plan);
  if (world.size() != layout.world()) {
    throw InputError(c.file, "$.parallel.world_size",
                     fmt::format("the plan has {} ranks (tp {} x cp {} x pp {} x dp {}) but this run has {}: start "
                                 "it with `mpirun -n {}` (or srun -n {})",
                                 layout.world(), c.plan.tp, c.plan.cp, c.plan.pp, c.plan.dp, world.size(), layout.world(),
                                 layout.world()));
  }
  ProcessGroups groups = make_process_groups(world, layout);
  if (c.plan.moe.active) make_expert_groups(world, expert_rank_layout(c.plan), groups);
  return groups;
}

// The groups over which a rank's sequence is split: tp with sequence
// parallelism, cp (an MoE layer sums its load-balancing counts over them).
std::vector<Communicator*> sequence_groups(const Shapes& shapes, const ProcessGroups& groups) {
  std::vector<Communicator*> out;
  if (shapes.sequence_parallel) out.push_back(groups.tp.get());
  if (shapes.cp > 1) out.push_back(groups.cp.get());
  return out;
}

StoreOptions store_options(const RunConfig& c) {
  StoreOptions o;
  o.zero_stage = c.plan.zero_stage;
  o.overlap_grad_reduce = c.plan.overlap_grad_reduce;
  o.overlap_param_gather = c.plan.overlap_param_gather;
  o.sequence_parallel = c.plan.sequence_parallel;
  o.dtype = c.plan.dtype;
  o.seed = c.training.seed;
  o.adam = adam_params(c.training);
  return o;
}

}  // namespace

struct Executor::Impl {
  Impl(const RunConfig& c, Device& d, Communicator& w)
      : config(c), device(d), world(w), groups(checked_groups(c, w)), recorder(d),
        layout(make_param_layout(c.model, c.plan, groups.coord.tp, groups.coord.pp, groups.expert_coord.ep)),
        shapes(make_shapes(c.model, c.plan, groups.coord.tp, d.storage_dtype(c.plan.dtype))),
        kernels(d, *groups.tp, recorder, shapes),
        cp_attention(c.plan.cp > 1 ? std::make_unique<ContextParallelAttention>(kernels, *groups.cp, c.plan.cp_comm_type)
                                   : nullptr),
        // d(step loss) / d(a micro-batch's load-balancing loss): Megatron averages
        // it over the step's micro-batches of every replica.
        moe(c.plan.moe.active ? std::make_unique<MoeMlp>(kernels, *groups.ep, c.model, c.plan,
                                                          static_cast<double>(c.plan.micro_batch_size) /
                                                              c.plan.global_batch_size,
                                                          sequence_groups(shapes, groups))
                              : nullptr),
        layer(kernels, c.plan.recompute, cp_attention.get(), moe.get()), embedding_head(kernels) {
    const PlanSpec& p = config.plan;
    links = std::make_unique<PipelineLinks>(*groups.pp, p);
    // Hybrid sharding: the shard groups (PlanSpec::zero_shard_group_of, as the
    // simulator forms them) and the groups across them, the ranks with the same
    // place in theirs. Splits are collective: every rank makes both.
    Communicator* shard_group = groups.replicas.get();
    if (p.zero_shard_size > 0) {
      const int replica = groups.replicas->rank();
      shard = groups.replicas->split(p.zero_shard_group_of(replica), p.zero_shard_rank_of(replica));
      across = groups.replicas->split(p.zero_shard_rank_of(replica), p.zero_shard_group_of(replica));
      shard_group = shard.get();
    }
    store = std::make_unique<ParameterStore>(device, layout, store_options(config), groups.coord, *groups.tp,
                                             *shard_group, groups.embedding.get(), recorder, across.get(),
                                             groups.expert_dp.get());
    program = pipeline_program(p.schedule, p.pp, p.vpp, p.num_microbatches(), groups.coord.pp);
    split = pipeline_split(config.model, p);
    last_vs = p.pp * p.vpp - 1;
    // The op after which each chunk's gradients are final: its last backward,
    // or its last W when the schedule splits the backward.
    last_backward.assign(program.size(), 0);
    for (int chunk = 0; chunk < p.vpp; ++chunk) {
      int at = -1;
      for (int i = 0; i < static_cast<int>(program.size()); ++i) {
        if (computes_weight_grads(program[i], p.schedule) && program[i].chunk == chunk) at = i;
      }
      if (at >= 0) last_backward[at] = 1;
    }
    state.resize(p.vpp);
    for (auto& chunk_state : state) chunk_state.resize(p.num_microbatches());
    if (splits_backward(p.schedule)) {
      deferred.resize(p.vpp);
      for (auto& chunk_deferred : deferred) chunk_deferred.resize(p.num_microbatches());
    }
    // Positions of this rank's tokens ([b, s] rows of its context-parallel
    // chunks; a contiguous slice of those with sequence parallelism).
    local_positions = context_parallel_positions(shapes.seq, p.cp, groups.coord.cp);
    std::vector<std::int32_t> positions(static_cast<std::size_t>(shapes.local_tokens));
    const std::int64_t first = shapes.sequence_parallel ? groups.coord.tp * shapes.local_tokens : 0;
    for (std::int64_t i = 0; i < shapes.local_tokens; ++i) {
      positions[static_cast<std::size_t>(i)] = local_positions[static_cast<std::size_t>((first + i) % shapes.s)];
    }
    position_ids = device.allocate_indices(shapes.local_tokens);
    upload_indices(device, positions, position_ids.view());
    loss_sum = device.allocate_tensor(1, DType::kFp32);
    scalars = device.allocate_tensor(4, DType::kFp32);  // grad norm^2, loss sum, MoE load ratios, their count
    tmp = device.allocate_tensor(1, DType::kFp32);
    device.synchronize();
    device.reset_peak_memory();
  }

  // An MoE layer's experts unit, or null (eu -1: a dense layer).
  const Unit* experts_unit(int eu) const { return eu >= 0 ? &layout.units[eu] : nullptr; }

  int virtual_stage_of(const PipelineOp& op) const {
    return virtual_stage(config.plan, groups.coord.pp, op.chunk);
  }

  // The virtual stage op's input comes from (its forward's previous stage, its
  // backward's next), or -1: the first stage's forward, the last stage's backward, W.
  int source_stage(const PipelineOp& op) const {
    const int vs = virtual_stage_of(op);
    switch (op.phase) {
      case PipelinePhase::kForward: return vs > 0 ? vs - 1 : -1;
      case PipelinePhase::kBackward: return vs < last_vs ? vs + 1 : -1;
      case PipelinePhase::kWeightGrad: return -1;  // W needs nothing from another stage
    }
    return -1;
  }

  // Whether op's input comes over a pipeline link (not from this rank's other
  // chunk, as at the bottom of zb-v's V).
  bool needs_recv(const PipelineOp& op) const {
    const int from = source_stage(op);
    return from >= 0 && stage_place(config.plan, from).rank != groups.coord.pp;
  }

  void post_recv(const PipelineOp& op) {
    if (!needs_recv(op)) return;
    for (const PendingRecv& r : recvs) {
      if (r.op == op) return;
    }
    PendingRecv r;
    r.op = op;
    r.buffer = kernels.activation(shapes.local_tokens * shapes.h);
    const LinkKind kind = op.phase == PipelinePhase::kForward ? LinkKind::kActivations : LinkKind::kGradients;
    r.request = links->start_recv(kind, r.buffer.view(), op.microbatch, virtual_stage_of(op));
    recvs.push_back(std::move(r));
  }

  Tensor take_recv(const PipelineOp& op) {
    if (!needs_recv(op)) {
      // Handed over by this rank's other chunk (send below).
      const auto it = handoffs.find({op.phase == PipelinePhase::kForward, op.microbatch});
      if (it == handoffs.end()) throw InternalError("pipeline: a chunk's input was not handed over on its rank");
      Tensor t = std::move(it->second);
      handoffs.erase(it);
      return t;
    }
    post_recv(op);
    for (std::size_t i = 0; i < recvs.size(); ++i) {
      if (!(recvs[i].op == op)) continue;
      const TimeNs start = recorder.now_ns();
      recvs[i].request->wait();
      Tensor t = std::move(recvs[i].buffer);
      recvs.erase(recvs.begin() + static_cast<std::ptrdiff_t>(i));
      const bool forward = op.phase == PipelinePhase::kForward;
      const int from_vs = virtual_stage_of(op) + (forward ? -1 : 1);
      recorder.add(forward ? "recv activations" : "recv gradients", EventCategory::kPp, Lane::kPpRecv,
                   static_cast<double>(t.view().bytes()), start, recorder.now_ns(), recorder.context(),
                   transfer_id(forward ? LinkKind::kActivations : LinkKind::kGradients, op.microbatch, from_vs));
      return t;
    }
    throw InternalError("pipeline: a receive was not posted");
  }

  void send(LinkKind kind, Tensor x, int microbatch, int from_vs) {
    const int to_vs = kind == LinkKind::kActivations ? from_vs + 1 : from_vs - 1;
    if (stage_place(config.plan, to_vs).rank == groups.coord.pp) {
      handoffs[{kind == LinkKind::kActivations, microbatch}] = std::move(x);
      return;
    }
    PendingSend s;
    s.start_ns = recorder.now_ns();
    s.request = links->start_send(kind, x.view(), microbatch, from_vs);
    s.bytes = static_cast<double>(x.view().bytes());
    s.buffer = std::move(x);
    s.name = kind == LinkKind::kActivations ? "send activations" : "send gradients";
    s.context = recorder.context();
    s.transfer = transfer_id(kind, microbatch, from_vs);
    sends.push_back(std::move(s));
  }

  std::int64_t transfer_id(LinkKind kind, int microbatch, int from_vs) const {
    return pipeline_transfer_id(config.plan, groups.coord.tp, groups.coord.cp, groups.coord.dp, kind, microbatch,
                                from_vs);
  }

  void finish_send(PendingSend& s) {
    recorder.add(s.name, EventCategory::kPp, Lane::kPpSend, s.bytes, s.start_ns, recorder.now_ns(), s.context,
                 s.transfer);
  }

  void pump() {
    store->pump();
    for (std::size_t i = 0; i < sends.size();) {
      if (sends[i].request->test()) {
        finish_send(sends[i]);
        sends.erase(sends.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
  }

  void wait_sends() {
    for (PendingSend& s : sends) {
      s.request->wait();
      finish_send(s);
    }
    sends.clear();
  }

  TokenBatch tokens(int microbatch) const {
    const PlanSpec& p = config.plan;
    const std::int64_t first = global_sequence_index(step_index - 1, p.global_batch_size, p.dp, groups.coord.dp,
                                                     p.micro_batch_size, microbatch, 0);
    TokenBatch whole =
        synthetic_tokens(config.training.seed, first, p.micro_batch_size, config.model.seq_length, config.model.vocab_size);
    if (p.cp == 1) return whole;
    // This context-parallel rank's chunks of each sequence.
    TokenBatch mine;
    const std::size_t seq = static_cast<std::size_t>(shapes.seq);
    for (std::size_t bi = 0; bi < static_cast<std::size_t>(p.micro_batch_size); ++bi) {
      for (const std::int32_t pos : local_positions) {
        mine.ids.push_back(whole.ids[bi * seq + static_cast<std::size_t>(pos)]);
        mine.labels.push_back(whole.labels[bi * seq + static_cast<std::size_t>(pos)]);
      }
    }
    return mine;
  }

  // The unit holding the output layer of chunk c: untied output, the tied copy,
  // or (tied, with the embedding on this rank: pp == 1, or zb-v's rank 0) the
  // word embedding itself, which chunk 0 holds.
  int output_unit(int c) const {
    return layout.output_unit[c] >= 0 ? layout.output_unit[c] : layout.word_embedding_unit[0];
  }

  TensorView param(int unit, const TensorView& flat, std::size_t index) const {
    const Unit& u = layout.units[unit];
    if (index >= u.params.size()) return {};
    return flat.slice(u.params[index].offset, u.params[index].numel());
  }

  void forward(const PipelineOp& op) {
    const int c = op.chunk;
    const int vs = virtual_stage_of(op);
    EventContext& ctx = recorder.context();
    ctx = {op.microbatch, -1, c, EventPhase::kForward};
    MicrobatchState& st = state[c][op.microbatch];
    const int chunk_layers = split.chunk_layers(groups.coord.pp, c);
    st.layers.clear();
    st.layers.resize(chunk_layers);
    Tensor x;
    if (vs == 0) {
      const TokenBatch batch = tokens(op.microbatch);
      st.ids = device.allocate_indices(shapes.tokens);
      upload_indices(device, batch.ids, st.ids.view());
      const int wu = layout.word_embedding_unit[c];
      const int pu = layout.position_embedding_unit[c];
      const TensorView words = param(wu, store->acquire_weights(wu), 0);
      const TensorView positions = pu >= 0 ? param(pu, store->acquire_weights(pu), 0) : TensorView{};
      x = embedding_head.embedding_forward(words, positions, st.ids.view(), position_ids.view());
      if (pu >= 0) store->release_weights(pu);
      store->release_weights(wu);
    } else {
      x = take_recv(op);
    }
    const std::vector<int>& units = layout.layer_units[c];
    for (int j = 0; j < chunk_layers; ++j) {
      ctx.layer = split.chunk_first(groups.coord.pp, c) + j;
      const int eu = layout.expert_units[c][j];
      const TensorView w = store->acquire_weights(units[j]);
      const TensorView we = eu >= 0 ? store->acquire_weights(eu) : TensorView{};
      if (j + 1 < chunk_layers) store->prefetch_weights(units[j + 1]);
      st.layers[j].x = std::move(x);
      x = layer.forward(layer_params(layout.units[units[j]], w, experts_unit(eu), we), st.layers[j]);
      if (eu >= 0) store->release_weights(eu);
      store->release_weights(units[j]);
      pump();
    }
    ctx.layer = -1;
    if (vs == last_vs) {
      const TokenBatch batch = tokens(op.microbatch);
      IndexTensor labels = device.allocate_indices(shapes.tokens);
      upload_indices(device, batch.labels, labels.view());
      const int fu = layout.final_norm_unit[c];
      const int ou = output_unit(c);
      const TensorView wf = store->acquire_weights(fu);
      const TensorView wo = store->acquire_weights(ou);
      st.head.x = std::move(x);
      const float grad_scale =
          1.0f / static_cast<float>(static_cast<std::int64_t>(config.plan.global_batch_size) * config.model.seq_length);
      embedding_head.head_forward(param(fu, wf, 0), param(fu, wf, 1), param(ou, wo, 0), st.head, labels.view(),
                                  grad_scale, loss_sum.view(), tmp.view());
      store->release_weights(ou);
      store->release_weights(fu);
    } else {
      send(LinkKind::kActivations, std::move(x), op.microbatch, vs);
    }
  }

  // The backward of op; under a zero-bubble schedule its B only: the weight
  // GEMMs' gradients are left to weight_grad (W), which then also marks the
  // units' gradients done (so a bucket is reduced once all its gradients are in).
  void backward(const PipelineOp& op, bool last) {
    const int c = op.chunk;
    const int vs = virtual_stage_of(op);
    EventContext& ctx = recorder.context();
    ctx = {op.microbatch, -1, c, EventPhase::kBackward};
    MicrobatchState& st = state[c][op.microbatch];
    DeferredWeightGrads* later = deferred.empty() ? nullptr : &deferred[c][op.microbatch];
    if (later != nullptr) {
      later->layers.clear();
      later->layers.resize(static_cast<std::size_t>(split.chunk_layers(groups.coord.pp, c)));
    }
    Tensor dy;
    if (vs == last_vs) {
      const int fu = layout.final_norm_unit[c];
      const int ou = output_unit(c);
      const TensorView wf = store->acquire_weights(fu);
      const TensorView wo = store->acquire_weights(ou);
      const TensorView gf = store->acquire_grads(fu);
      const TensorView go = store->acquire_grads(ou);
      dy = embedding_head.head_backward(param(fu, wf, 0), param(ou, wo, 0), st.head, param(fu, gf, 0),
                                        param(fu, gf, 1), param(ou, go, 0), later != nullptr ? &later->head : nullptr);
      store->release_grads(ou);
      store->release_grads(fu);
      store->release_weights(ou);
      store->release_weights(fu);
      if (later == nullptr) head_units_done(c, last);
    } else {
      dy = take_recv(op);
    }
    const std::vector<int>& units = layout.layer_units[c];
    const int chunk_layers = split.chunk_layers(groups.coord.pp, c);
    for (int j = chunk_layers - 1; j >= 0; --j) {
      ctx.layer = split.chunk_first(groups.coord.pp, c) + j;
      const int eu = layout.expert_units[c][j];
      const TensorView w = store->acquire_weights(units[j]);
      const TensorView we = eu >= 0 ? store->acquire_weights(eu) : TensorView{};
      if (j > 0) store->prefetch_weights(units[j - 1]);
      const TensorView g = store->acquire_grads(units[j]);
      const TensorView ge = eu >= 0 ? store->acquire_grads(eu) : TensorView{};
      const Unit& unit = layout.units[units[j]];
      dy = layer.backward(layer_params(unit, w, experts_unit(eu), we), layer_params(unit, g, experts_unit(eu), ge),
                          st.layers[j], std::move(dy),
                          later != nullptr ? &later->layers[static_cast<std::size_t>(j)] : nullptr);
      if (eu >= 0) {
        store->release_grads(eu);
        store->release_weights(eu);
      }
      store->release_grads(units[j]);
      store->release_weights(units[j]);
      if (later == nullptr) {
        store->unit_backward_done(units[j], last);
        if (eu >= 0) store->unit_backward_done(eu, last);
      }
      pump();
    }
    ctx.layer = -1;
    if (vs == 0) {
      const int wu = layout.word_embedding_unit[c];
      const int pu = layout.position_embedding_unit[c];
      const TensorView gw = store->acquire_grads(wu);
      const TensorView gp = pu >= 0 ? param(pu, store->acquire_grads(pu), 0) : TensorView{};
      embedding_head.embedding_backward(dy.view(), st.ids.view(), position_ids.view(), param(wu, gw, 0), gp);
      if (pu >= 0) store->release_grads(pu);
      store->release_grads(wu);
      if (later == nullptr) embedding_units_done(c, last);
    } else {
      send(LinkKind::kGradients, std::move(dy), op.microbatch, vs);
    }
    if (later == nullptr) store->backward_op_done(c, last);
    st = MicrobatchState{};
  }

  // W of a zero-bubble schedule: the weight gradients B deferred, in the order
  // the backward would have computed them (so each gradient sums its micro-
  // batches in 1F1B's order), then the units' gradients marked done.
  void weight_grad(const PipelineOp& op, bool last) {
    const int c = op.chunk;
    const int vs = virtual_stage_of(op);
    EventContext& ctx = recorder.context();
    ctx = {op.microbatch, -1, c, EventPhase::kWeightGrad};
    DeferredWeightGrads& later = deferred[c][op.microbatch];
    if (vs == last_vs) {
      const int ou = output_unit(c);
      const TensorView go = store->acquire_grads(ou);
      kernels.deferred_wgrad(later.head, param(ou, go, 0), {});
      later.head = DeferredWgrad{};
      store->release_grads(ou);
      head_units_done(c, last);
    }
    const std::vector<int>& units = layout.layer_units[c];
    for (int j = static_cast<int>(later.layers.size()) - 1; j >= 0; --j) {
      ctx.layer = split.chunk_first(groups.coord.pp, c) + j;
      const TensorView g = store->acquire_grads(units[j]);
      layer.weight_grads(layer_params(layout.units[units[j]], g), later.layers[static_cast<std::size_t>(j)]);
      store->release_grads(units[j]);
      store->unit_backward_done(units[j], last);
      pump();
    }
    ctx.layer = -1;
    if (vs == 0) embedding_units_done(c, last);
    store->backward_op_done(c, last);
    later = DeferredWeightGrads{};
  }

  // The last stage's final norm and output layer have their gradients of this op.
  void head_units_done(int c, bool last) {
    store->unit_backward_done(layout.final_norm_unit[c], last);
    // The tied word embedding on this rank (pp == 1, zb-v) is done after the
    // embedding's backward: on zb-v's rank 0 chunk 0's last W runs after chunk
    // 1's, so the output layer's part is in by then.
    const int ou = output_unit(c);
    if (ou != layout.word_embedding_unit[0]) store->unit_backward_done(ou, last);
  }

  // The first stage's embeddings have their gradients of this op.
  void embedding_units_done(int c, bool last) {
    if (layout.position_embedding_unit[c] >= 0) store->unit_backward_done(layout.position_embedding_unit[c], last);
    store->unit_backward_done(layout.word_embedding_unit[c], last);
  }

  StepResult step() {
    world.barrier();
    recorder.begin_step();
    const auto t0 = std::chrono::steady_clock::now();
    ++step_index;
    store->begin_step();
    device.fill(loss_sum.view(), 0.0f);
    for (std::size_t i = 0; i < program.size(); ++i) {
      post_recv(program[i]);
      // Receive one op ahead, so the transfer overlaps this op's compute.
      if (i + 1 < program.size()) post_recv(program[i + 1]);
      switch (program[i].phase) {
        case PipelinePhase::kForward: forward(program[i]); break;
        case PipelinePhase::kBackward: backward(program[i], last_backward[i] != 0); break;
        case PipelinePhase::kWeightGrad: weight_grad(program[i], last_backward[i] != 0); break;
      }
      pump();
    }
    wait_sends();
    EventContext& ctx = recorder.context();
    ctx = {-1, -1, 0, EventPhase::kBackward};
    store->finish_reductions();
    ctx = {-1, -1, 0, EventPhase::kStep};
    // One all-reduce for the gradient norm (Megatron's clip_grad_norm_fp32: each
    // rank's share of the squares) and the loss (the last stage's tp rank 0 of
    // every replica and context-parallel rank: each holds its tokens' part).
    device.fill(scalars.view(), 0.0f);
    store->add_grad_norm_squares(scalars.view().slice(0, 1), tmp.view());
    if (groups.coord.pp == head_rank(config.plan) && groups.coord.tp == 0) {
      device.axpy(1.0f, loss_sum.view(), scalars.view().slice(1, 1));
    }
    if (moe) {
      upload_fp32(device, {static_cast<float>(moe->load_ratio_sum()), static_cast<float>(moe->load_samples())},
                  scalars.view().slice(2, 2));
      moe->reset_load();
    }
    const TimeNs start = recorder.now_ns();
    world.all_reduce(scalars.view(), scalars.view());
    recorder.add("grad norm all_reduce", EventCategory::kDp, Lane::kDpComm, static_cast<double>(scalars.view().bytes()),
                 start, recorder.now_ns());
    store->optimizer_step(step_index);
    device.synchronize();
    world.barrier();
    const auto t1 = std::chrono::steady_clock::now();
    recorder.end_step();
    const std::vector<float> values = download_fp32(device, scalars.view());
    StepResult r;
    r.step_time_s = std::chrono::duration<double>(t1 - t0).count();
    r.grad_norm = std::sqrt(static_cast<double>(values[0]));
    r.loss = static_cast<double>(values[1]) /
             (static_cast<double>(config.plan.global_batch_size) * config.model.seq_length);
    if (values[3] > 0.0f) r.expert_load = static_cast<double>(values[2]) / values[3];
    return r;
  }

  std::map<std::string, std::vector<float>> full_parameters() {
    const auto sizes = global_parameter_sizes(config.model);
    std::map<std::string, std::int64_t> offsets;
    std::int64_t total = 0;
    for (const auto& [name, n] : sizes) {
      offsets[name] = total;
      total += n;
    }
    std::vector<float> host(static_cast<std::size_t>(total), 0.0f);
    for (int u = 0; u < static_cast<int>(layout.units.size()); ++u) {
      const std::vector<float> values = download_fp32(device, store->acquire_weights(u));
      store->release_weights(u);
      // One copy of each parameter: the replicas' first, or the expert data-parallel group's.
      const bool experts = layout.units[u].kind == UnitKind::kExperts;
      if ((experts ? groups.expert_dp->rank() : groups.replicas->rank()) != 0) continue;
      for (const ParamSpec& p : layout.units[u].params) {
        if (p.tied_copy || (p.replicated && groups.coord.tp != 0)) continue;
        for (const ParamSpec::Piece& piece : p.pieces) {
          const std::int64_t n = piece.rows * p.cols;
          std::copy_n(values.begin() + p.offset + piece.local_row * p.cols, n,
                      host.begin() + offsets.at(p.name) + piece.global_row * p.cols);
        }
      }
    }
    // Each global element comes from exactly one rank: the sum assembles the model.
    Tensor all = device.allocate_tensor(total, DType::kFp32);
    upload_fp32(device, host, all.view());
    world.all_reduce(all.view(), all.view());
    host = download_fp32(device, all.view());
    std::map<std::string, std::vector<float>> out;
    for (const auto& [name, n] : sizes) {
      const std::int64_t at = offsets.at(name);
      out[name] = std::vector<float>(host.begin() + at, host.begin() + at + n);
    }
    return out;
  }

  RunConfig config;
  Device& device;
  Communicator& world;
  ProcessGroups groups;
  Recorder recorder;
  ParamLayout layout;
  Shapes shapes;
  Kernels kernels;
  std::unique_ptr<ContextParallelAttention> cp_attention;  // cp > 1
  std::unique_ptr<MoeMlp> moe;                             // MoE models
  TransformerLayer layer;
  EmbeddingHead embedding_head;
  std::unique_ptr<PipelineLinks> links;
  std::unique_ptr<Communicator> shard, across;  // hybrid sharding's groups (else null)
  std::unique_ptr<ParameterStore> store;
  std::vector<PipelineOp> program;
  std::vector<char> last_backward;
  std::vector<std::vector<MicrobatchState>> state;
  std::vector<std::vector<DeferredWeightGrads>> deferred;  // [chunk][micro-batch], zero-bubble schedules only
  std::vector<PendingRecv> recvs;
  // zb-v's turn at the bottom of the V: (activations?, micro-batch) -> the tensor
  // chunk 0 passes to chunk 1 (activations) or chunk 1 back to chunk 0.
  std::map<std::pair<bool, int>, Tensor> handoffs;
  std::vector<PendingSend> sends;
  std::vector<std::int32_t> local_positions;  // the sequence positions of this cp rank's s/cp tokens
  IndexTensor position_ids;
  Tensor loss_sum, scalars, tmp;
  std::int64_t step_index = 0;
  PipelineSplit split;  // which layers each of this rank's chunks holds
  int last_vs = 0;
};

Executor::Executor(const RunConfig& config, Device& device, Communicator& world)
    : impl_(std::make_unique<Impl>(config, device, world)) {}

Executor::~Executor() = default;

StepResult Executor::step() { return impl_->step(); }

void Executor::finish() {
  impl_->wait_sends();
  impl_->store->wait_all();
  impl_->device.synchronize();
}

const RankCoord& Executor::coord() const { return impl_->groups.coord; }
Recorder& Executor::recorder() { return impl_->recorder; }
std::int64_t Executor::peak_memory_bytes() const { return impl_->device.peak_memory_bytes(); }

std::map<std::string, std::vector<float>> Executor::full_parameters() { return impl_->full_parameters(); }

}  // namespace strata::rt
