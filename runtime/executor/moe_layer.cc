#include "runtime/executor/moe_layer.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "runtime/device/tensor_io.h"

namespace strata::rt {
namespace {

using i64 = std::int64_t;
constexpr Transpose N = Transpose::kNo;
constexpr Transpose T = Transpose::kYes;

// One GEMM C = op(A) op(B) (+ beta C).
GemmArgs one_gemm(Transpose ta, Transpose tb, i64 m, i64 n, i64 k, const TensorView& a, i64 lda, const TensorView& b,
                  i64 ldb, const TensorView& c, i64 ldc, float beta = 0.0f) {
  return strided_batched_gemm(ta, tb, m, n, k, a, lda, 0, b, ldb, 0, c, ldc, 0, 1, beta);
}

// Rows [first, first + rows) of a [.., cols] tensor.
TensorView rows_of(const TensorView& v, i64 first, i64 rows, i64 cols) { return v.slice(first * cols, rows * cols); }

i64 sum(const std::vector<i64>& v) { return std::accumulate(v.begin(), v.end(), i64{0}); }

// A host-side collective (blocking), timed as one event on the tp-comm lane.
template <class F>
void timed_collective(Recorder& rec, const char* name, EventCategory category, double bytes, F&& collective) {
  const TimeNs start = rec.now_ns();
  collective();
  rec.add(name, category, Lane::kTpComm, bytes, start, rec.now_ns());
}

// Host values on the device, in a tensor (index or fp32) of their size.
IndexTensor indices_on(Device& dev, const std::vector<std::int32_t>& values) {
  IndexTensor t = dev.allocate_indices(static_cast<i64>(values.size()));
  upload_indices(dev, values, t.view());
  return t;
}
Tensor fp32_on(Device& dev, const std::vector<float>& values) {
  Tensor t = dev.allocate_tensor(static_cast<i64>(values.size()), DType::kFp32);
  upload_fp32(dev, values, t.view());
  return t;
}

}  // namespace

MoeMlp::MoeMlp(Kernels& kernels, Communicator& ep, const ModelSpec& model, const PlanSpec& plan, double aux_grad_scale,
               std::vector<Communicator*> sequence_groups)
    : k_(kernels), ep_(ep), sequence_groups_(std::move(sequence_groups)) {
  const MoeModel& moe = model.moe;
  if (!model.is_moe() || plan.moe.etp != 1 || moe.num_experts % ep.size() != 0) {
    throw InternalError("MoeMlp: needs an MoE model, etp 1 and ep dividing the experts");
  }
  experts_ = moe.num_experts;
  local_ = moe.num_experts / ep.size();
  topk_ = moe.moe_router_topk;
  f_ = moe.moe_ffn_hidden_size;
  fc1_ = model.swiglu ? 2 * f_ : f_;
  capacity_factor_ = plan.moe.expert_capacity_factor;
  aux_coeff_ = moe.moe_router_load_balancing_type == "aux_loss" ? moe.moe_aux_loss_coeff : 0.0;
  aux_grad_scale_ = aux_grad_scale;
  allgather_ = plan.moe.token_dispatcher == MoeDispatcher::kAllGather;
}

Tensor MoeMlp::exchange(const char* name, const TensorView& src, const std::vector<i64>& send_counts,
                        const std::vector<i64>& recv_counts) {
  Tensor out = k_.activation(sum(recv_counts));
  timed_collective(k_.recorder(), name, EventCategory::kEp, static_cast<double>(src.bytes()),
                   [&] { ep_.all_to_all_v(src, send_counts, out.view(), recv_counts); });
  return out;
}

BalanceCounts MoeMlp::balance_counts(const Routing& r) {
  BalanceCounts counts = own_balance_counts(r);
  if (aux_coeff_ <= 0.0 || sequence_groups_.empty()) return counts;
  Device& dev = k_.device();
  std::vector<float> values(counts.chosen_per_expert.begin(), counts.chosen_per_expert.end());
  values.push_back(static_cast<float>(counts.tokens));
  Tensor sums = fp32_on(dev, values);
  for (Communicator* group : sequence_groups_) {
    timed_collective(k_.recorder(), "aux_loss counts all_reduce", EventCategory::kTp,
                     static_cast<double>(sums.view().bytes()), [&] { group->all_reduce(sums.view(), sums.view()); });
  }
  values = download_fp32(dev, sums.view());
  for (int e = 0; e < experts_; ++e) counts.chosen_per_expert[e] = static_cast<i64>(std::llround(values[e]));
  counts.tokens = values.back();
  return counts;
}

Tensor MoeMlp::reorder(const char* name, const TensorView& src, const IndexTensor& order, i64 rows) {
  const i64 h = k_.shapes().h;
  Tensor out = k_.activation(rows * h);
  k_.recorder().compute(name, EventCategory::kElementwise, 0.0, 2.0 * static_cast<double>(out.view().bytes()),
                        [&] { k_.device().gather_sum_rows(src, order.view(), {}, 1, h, out.view()); });
  return out;
}

void MoeMlp::route(const TensorView& router, const TensorView& x, MoeActivations& a) {
  const i64 tokens = k_.shapes().local_tokens;
  {
    Tensor logits = k_.activation(tokens * experts_);
    k_.column_forward("router", x, router, {}, tokens, k_.shapes().h, experts_, logits.view());
    a.logits = download_fp32(k_.device(), logits.view());
  }
  a.routing = route_tokens(a.logits, tokens, experts_, topk_, capacity_factor_);
  a.balance = balance_counts(a.routing);
}

void MoeMlp::record_load(const std::vector<i64>& rows_per_rank) {
  if (k_.recorder().context().phase != EventPhase::kForward) return;  // a recompute routes again
  const i64 total = sum(rows_per_rank);
  if (total <= 0) return;
  const i64 busiest = *std::max_element(rows_per_rank.begin(), rows_per_rank.end());
  load_ratio_sum_ += static_cast<double>(busiest) * static_cast<double>(rows_per_rank.size()) /
                     static_cast<double>(total);
  ++load_samples_;
}

Tensor MoeMlp::forward(const TensorView& router, const Unit& unit, const TensorView& w, const TensorView& x,
                       MoeActivations& a) {
  route(router, x, a);
  return allgather_ ? forward_allgather(unit, w, x, a) : forward_alltoall(unit, w, x, a);
}

Tensor MoeMlp::backward(const TensorView& router, const TensorView& router_grad, const Unit& unit, const TensorView& w,
                        const TensorView& g, const TensorView& x, const TensorView& dy, MoeActivations& a) {
  Tensor gate_grad = k_.fp32(k_.shapes().local_tokens * topk_);
  Tensor dx = allgather_ ? backward_allgather(unit, w, g, dy, gate_grad, a) : backward_alltoall(unit, w, g, dy, gate_grad, a);
  router_backward(router, router_grad, x, gate_grad, dx, a);
  a = MoeActivations{};
  return dx;
}

Tensor MoeMlp::forward_alltoall(const Unit& unit, const TensorView& w, const TensorView& x, MoeActivations& a) {
  const Shapes& s = k_.shapes();
  Device& dev = k_.device();
  Recorder& rec = k_.recorder();
  const i64 tokens = s.local_tokens;
  const i64 h = s.h;
  const int ep = ep_.size();
  const int me = ep_.rank();
  const Routing& r = a.routing;
  const i64 routed = r.routed();
  a.slots = indices_on(dev, r.slot);
  a.row_tokens = indices_on(dev, r.row_token);
  a.row_gates = fp32_on(dev, r.row_gate);
  std::vector<float> combine = r.gate;
  for (std::size_t c = 0; c < combine.size(); ++c) {
    if (r.slot[c] < 0) combine[c] = 0.0f;
  }
  a.gates = fp32_on(dev, combine);

  // This rank's copies, expert by expert.
  Tensor permuted = k_.activation(routed * h);
  rec.compute("permute", EventCategory::kElementwise, 0.0, 2.0 * static_cast<double>(permuted.view().bytes()),
              [&] { dev.gather_sum_rows(x, a.row_tokens.view(), {}, 1, h, permuted.view()); });

  // Every ep rank's rows per expert (Megatron gathers tokens_per_expert the same way).
  std::vector<i64> counts(r.per_expert);
  if (ep > 1) {
    const Tensor mine = fp32_on(dev, std::vector<float>(r.per_expert.begin(), r.per_expert.end()));
    Tensor all = k_.fp32(static_cast<i64>(ep) * experts_);
    timed_collective(rec, "tokens_per_expert all_gather", EventCategory::kEp, static_cast<double>(all.view().bytes()),
                     [&] { ep_.all_gather(mine.view(), all.view()); });
    const std::vector<float> got = download_fp32(dev, all.view());
    counts.resize(got.size());
    for (std::size_t i = 0; i < got.size(); ++i) counts[i] = static_cast<i64>(std::llround(got[i]));
  }
  // counts[q * E + e]: rows rank q sends expert e.
  a.send_counts.assign(static_cast<std::size_t>(ep), 0);
  a.recv_counts.assign(static_cast<std::size_t>(ep), 0);
  a.expert_rows.assign(static_cast<std::size_t>(local_), 0);
  std::vector<i64> rows_per_rank(static_cast<std::size_t>(ep), 0);
  for (int q = 0; q < ep; ++q) {
    for (int l = 0; l < local_; ++l) {
      a.send_counts[q] += r.per_expert[q * local_ + l] * h;
      const i64 in = counts[static_cast<std::size_t>(q) * experts_ + me * local_ + l];
      a.recv_counts[q] += in * h;
      a.expert_rows[l] += in;
      for (int src = 0; src < ep; ++src) rows_per_rank[q] += counts[static_cast<std::size_t>(src) * experts_ + q * local_ + l];
    }
  }
  record_load(rows_per_rank);
  const i64 received = sum(a.expert_rows);

  // Dispatch, then the received rows (source by source, each expert by expert)
  // expert by expert (Megatron's sort_chunks_by_idxs).
  if (ep > 1) {
    Tensor got = exchange("all_to_all", permuted.view(), a.send_counts, a.recv_counts);
    permuted = Tensor();
    std::vector<std::int32_t> order;
    std::vector<std::int32_t> inverse(static_cast<std::size_t>(received));
    order.reserve(static_cast<std::size_t>(received));
    for (int l = 0; l < local_; ++l) {
      i64 source_start = 0;
      for (int q = 0; q < ep; ++q) {
        i64 at = source_start;
        for (int j = 0; j < l; ++j) at += counts[static_cast<std::size_t>(q) * experts_ + me * local_ + j];
        const i64 rows = counts[static_cast<std::size_t>(q) * experts_ + me * local_ + l];
        for (i64 i = 0; i < rows; ++i) {
          inverse[static_cast<std::size_t>(at + i)] = static_cast<std::int32_t>(order.size());
          order.push_back(static_cast<std::int32_t>(at + i));
        }
        source_start += a.recv_counts[q] / h;
      }
    }
    a.expert_order = indices_on(dev, order);
    a.source_order = indices_on(dev, inverse);
    a.expert_in = reorder("sort_chunks", got.view(), a.expert_order, received);
  } else {
    a.expert_in = std::move(permuted);
  }
  Tensor out_experts = experts_forward(unit, w, a);

  // Combine: back to the ranks the copies came from, then each token's copies summed by its gates.
  if (ep > 1) {
    Tensor by_source = reorder("unsort_chunks", out_experts.view(), a.source_order, received);
    out_experts = Tensor();
    a.expert_out = exchange("all_to_all", by_source.view(), a.recv_counts, a.send_counts);
  } else {
    a.expert_out = std::move(out_experts);
  }
  Tensor out = k_.activation(tokens * h);
  rec.compute("unpermute", EventCategory::kElementwise, 0.0,
              static_cast<double>(a.expert_out.view().bytes() + out.view().bytes()), [&] {
                dev.gather_sum_rows(a.expert_out.view(), a.slots.view(), a.gates.view(), topk_, h, out.view());
              });
  return out;
}

// Megatron-Core's MoEAllGatherTokenDispatcher: every token of the ep group (and
// every token's routing) gathered on every rank, which runs the copies its own
// experts take; each token's gated sum of those is this rank's part of the
// output, which a reduce-scatter sums over the group back to the tokens' ranks.
Tensor MoeMlp::forward_allgather(const Unit& unit, const TensorView& w, const TensorView& x, MoeActivations& a) {
  const Shapes& s = k_.shapes();
  Device& dev = k_.device();
  Recorder& rec = k_.recorder();
  const i64 tokens = s.local_tokens;
  const i64 h = s.h;
  const int ep = ep_.size();
  const int me = ep_.rank();
  const Routing& r = a.routing;
  const i64 slots = tokens * topk_;

  // The hidden states and each copy's (expert or -1 when dropped, gate) of the whole group.
  Tensor gathered = k_.activation(ep * tokens * h);
  timed_collective(rec, "all_gather", EventCategory::kEp, static_cast<double>(gathered.view().bytes()),
                   [&] { ep_.all_gather(x, gathered.view()); });
  std::vector<float> mine(static_cast<std::size_t>(2 * slots));
  for (i64 c = 0; c < slots; ++c) {
    mine[static_cast<std::size_t>(c)] = r.slot[c] < 0 ? -1.0f : static_cast<float>(r.expert[c]);
    mine[static_cast<std::size_t>(slots + c)] = r.gate[c];
  }
  std::vector<float> all = mine;
  if (ep > 1) {
    const Tensor m = fp32_on(dev, mine);
    Tensor g = k_.fp32(ep * 2 * slots);
    timed_collective(rec, "routing all_gather", EventCategory::kEp, static_cast<double>(g.view().bytes()),
                     [&] { ep_.all_gather(m.view(), g.view()); });
    all = download_fp32(dev, g.view());
  }
  auto expert_of = [&](int src, i64 c) { return static_cast<int>(all[static_cast<std::size_t>(src * 2 * slots + c)]); };
  // The rows each rank's experts take (the load), and this rank's per local expert.
  std::vector<i64> rows_per_rank(static_cast<std::size_t>(ep), 0);
  a.expert_rows.assign(static_cast<std::size_t>(local_), 0);
  for (int src = 0; src < ep; ++src) {
    for (i64 c = 0; c < slots; ++c) {
      const int e = expert_of(src, c);
      if (e < 0) continue;
      ++rows_per_rank[static_cast<std::size_t>(e / local_)];
      if (e / local_ == me) ++a.expert_rows[static_cast<std::size_t>(e % local_)];
    }
  }
  record_load(rows_per_rank);
  // This rank's experts' copies, expert by expert and in token order within one
  // (one pass, each copy to the next row of its expert); slot_row[(src * tokens
  // + t) * k + j]: the row of that copy here, or -1.
  const i64 received = sum(a.expert_rows);
  std::vector<i64> next_row(static_cast<std::size_t>(local_), 0);
  for (int l = 1; l < local_; ++l) next_row[l] = next_row[l - 1] + a.expert_rows[l - 1];
  std::vector<std::int32_t> row_token(static_cast<std::size_t>(received));
  std::vector<float> row_gate(static_cast<std::size_t>(received));
  std::vector<std::int32_t> slot_row(static_cast<std::size_t>(ep * slots), -1);
  std::vector<float> slot_gate(static_cast<std::size_t>(ep * slots), 0.0f);
  for (int src = 0; src < ep; ++src) {
    for (i64 c = 0; c < slots; ++c) {
      const int e = expert_of(src, c);
      if (e < 0 || e / local_ != me) continue;
      const i64 row = next_row[static_cast<std::size_t>(e % local_)]++;
      const std::size_t slot = static_cast<std::size_t>(src * slots + c);
      slot_row[slot] = static_cast<std::int32_t>(row);
      slot_gate[slot] = all[static_cast<std::size_t>(src * 2 * slots + slots + c)];
      row_token[static_cast<std::size_t>(row)] = static_cast<std::int32_t>(src * tokens + c / topk_);
      row_gate[static_cast<std::size_t>(row)] = slot_gate[slot];
    }
  }
  a.row_tokens = indices_on(dev, row_token);
  a.row_gates = fp32_on(dev, row_gate);
  a.slots = indices_on(dev, slot_row);
  a.gates = fp32_on(dev, slot_gate);

  a.expert_in = k_.activation(received * h);
  rec.compute("permute", EventCategory::kElementwise, 0.0, 2.0 * static_cast<double>(a.expert_in.view().bytes()), [&] {
    dev.gather_sum_rows(gathered.view(), a.row_tokens.view(), {}, 1, h, a.expert_in.view());
  });
  gathered = Tensor();
  a.expert_out = experts_forward(unit, w, a);
  // This rank's gated part of every token of the group, summed over the group to each token's rank.
  Tensor partial = k_.activation(ep * tokens * h);
  rec.compute("unpermute", EventCategory::kElementwise, 0.0,
              static_cast<double>(a.expert_out.view().bytes() + partial.view().bytes()), [&] {
                dev.gather_sum_rows(a.expert_out.view(), a.slots.view(), a.gates.view(), topk_, h, partial.view());
              });
  Tensor out = k_.activation(tokens * h);
  timed_collective(rec, "reduce_scatter", EventCategory::kEp, static_cast<double>(partial.view().bytes()),
                   [&] { ep_.reduce_scatter(partial.view(), out.view()); });
  return out;
}

Tensor MoeMlp::experts_forward(const Unit& unit, const TensorView& w, MoeActivations& a) {
  const Shapes& s = k_.shapes();
  Device& dev = k_.device();
  Recorder& rec = k_.recorder();
  const i64 h = s.h;
  const i64 received = sum(a.expert_rows);
  const TensorView in = a.expert_in.view();
  a.fc1_out = k_.activation(received * fc1_);
  rec.compute("expert_fc1", EventCategory::kGemm, 2.0 * static_cast<double>(received) * fc1_ * h, 0.0, [&] {
    each_expert(a, [&](int l, i64 first, i64 rows) {
      const ExpertView v = expert_view(unit, w, l);
      const TensorView y = rows_of(a.fc1_out.view(), first, rows, fc1_);
      dev.gemm(one_gemm(N, T, rows, fc1_, h, rows_of(in, first, rows, h), h, v.fc1_weight, h, y, fc1_));
      if (v.fc1_bias.numel > 0) dev.add_bias(y, v.fc1_bias, rows, fc1_);
    });
  });
  a.act_out = k_.activation(received * f_);
  rec.compute(s.swiglu ? "expert_swiglu" : "expert_gelu", EventCategory::kElementwise, 0.0,
              static_cast<double>(a.fc1_out.view().bytes() + a.act_out.view().bytes()), [&] {
                if (received == 0) return;
                if (s.swiglu) {
                  dev.swiglu_forward(a.fc1_out.view(), received, f_, a.act_out.view());
                } else {
                  dev.gelu_forward(a.fc1_out.view(), a.act_out.view());
                }
              });
  Tensor out = k_.activation(received * h);
  rec.compute("expert_fc2", EventCategory::kGemm, 2.0 * static_cast<double>(received) * f_ * h, 0.0, [&] {
    each_expert(a, [&](int l, i64 first, i64 rows) {
      const ExpertView v = expert_view(unit, w, l);
      const TensorView y = rows_of(out.view(), first, rows, h);
      dev.gemm(one_gemm(N, N, rows, h, f_, rows_of(a.act_out.view(), first, rows, f_), f_, v.fc2_weight, h, y, h));
      if (v.fc2_bias.numel > 0) dev.add_bias(y, v.fc2_bias, rows, h);
    });
  });
  return out;
}

Tensor MoeMlp::backward_alltoall(const Unit& unit, const TensorView& w, const TensorView& g, const TensorView& dy,
                                 const Tensor& gate_grad, MoeActivations& a) {
  const Shapes& s = k_.shapes();
  Device& dev = k_.device();
  Recorder& rec = k_.recorder();
  const i64 tokens = s.local_tokens;
  const i64 h = s.h;
  const int ep = ep_.size();
  const i64 routed = a.routing.routed();
  const i64 received = sum(a.expert_rows);

  // The unpermutation's backward: the gates' gradient, and each copy's output gradient.
  Tensor d_here = k_.activation(routed * h);
  rec.compute("unpermute bwd", EventCategory::kElementwise, 0.0,
              static_cast<double>(a.expert_out.view().bytes() + d_here.view().bytes()), [&] {
                dev.gather_row_dots(dy, a.expert_out.view(), a.slots.view(), topk_, h, gate_grad.view());
                dev.gather_sum_rows(dy, a.row_tokens.view(), a.row_gates.view(), 1, h, d_here.view());
              });
  a.expert_out = Tensor();
  Tensor d_out;  // [received, h], expert by expert
  if (ep > 1) {
    Tensor got = exchange("all_to_all", d_here.view(), a.send_counts, a.recv_counts);
    d_here = Tensor();
    d_out = reorder("sort_chunks", got.view(), a.expert_order, received);
  } else {
    d_out = std::move(d_here);
  }
  Tensor d_in = experts_backward(unit, w, g, std::move(d_out), a);

  // Back to the ranks the copies came from; each token's copies summed.
  Tensor d_copies;
  if (ep > 1) {
    Tensor by_source = reorder("unsort_chunks", d_in.view(), a.source_order, received);
    d_in = Tensor();
    d_copies = exchange("all_to_all", by_source.view(), a.recv_counts, a.send_counts);
  } else {
    d_copies = std::move(d_in);
  }
  Tensor dx = k_.activation(tokens * h);
  rec.compute("permute bwd", EventCategory::kElementwise, 0.0,
              static_cast<double>(d_copies.view().bytes() + dx.view().bytes()),
              [&] { dev.gather_sum_rows(d_copies.view(), a.slots.view(), {}, topk_, h, dx.view()); });
  return dx;
}

// The allgather dispatcher's backward: the output gradient gathered over the
// group; the gates' gradient and each input's gradient of this rank's copies,
// summed over the group (reduce-scatters) back to the tokens' ranks.
Tensor MoeMlp::backward_allgather(const Unit& unit, const TensorView& w, const TensorView& g, const TensorView& dy,
                                  const Tensor& gate_grad, MoeActivations& a) {
  const Shapes& s = k_.shapes();
  Device& dev = k_.device();
  Recorder& rec = k_.recorder();
  const i64 tokens = s.local_tokens;
  const i64 h = s.h;
  const int ep = ep_.size();
  const i64 received = sum(a.expert_rows);
  Tensor d_all = k_.activation(ep * tokens * h);
  timed_collective(rec, "all_gather", EventCategory::kEp, static_cast<double>(d_all.view().bytes()),
                   [&] { ep_.all_gather(dy, d_all.view()); });
  Tensor gate_parts = k_.fp32(ep * tokens * topk_);
  Tensor d_out = k_.activation(received * h);
  rec.compute("unpermute bwd", EventCategory::kElementwise, 0.0,
              static_cast<double>(a.expert_out.view().bytes() + d_out.view().bytes()), [&] {
                dev.gather_row_dots(d_all.view(), a.expert_out.view(), a.slots.view(), topk_, h, gate_parts.view());
                dev.gather_sum_rows(d_all.view(), a.row_tokens.view(), a.row_gates.view(), 1, h, d_out.view());
              });
  d_all = Tensor();
  a.expert_out = Tensor();
  // Each copy's gate has its gradient on the one rank whose expert took it.
  timed_collective(rec, "gates reduce_scatter", EventCategory::kEp, static_cast<double>(gate_parts.view().bytes()),
                   [&] { ep_.reduce_scatter(gate_parts.view(), gate_grad.view()); });
  Tensor d_in = experts_backward(unit, w, g, std::move(d_out), a);
  Tensor d_partial = k_.activation(ep * tokens * h);
  rec.compute("permute bwd", EventCategory::kElementwise, 0.0,
              static_cast<double>(d_in.view().bytes() + d_partial.view().bytes()),
              [&] { dev.gather_sum_rows(d_in.view(), a.slots.view(), {}, topk_, h, d_partial.view()); });
  d_in = Tensor();
  Tensor dx = k_.activation(tokens * h);
  timed_collective(rec, "reduce_scatter", EventCategory::kEp, static_cast<double>(d_partial.view().bytes()),
                   [&] { ep_.reduce_scatter(d_partial.view(), dx.view()); });
  return dx;
}

Tensor MoeMlp::experts_backward(const Unit& unit, const TensorView& w, const TensorView& g, Tensor d_out,
                                MoeActivations& a) {
  const Shapes& s = k_.shapes();
  Device& dev = k_.device();
  Recorder& rec = k_.recorder();
  const i64 h = s.h;
  const i64 received = sum(a.expert_rows);
  const double fc2_flops = 2.0 * static_cast<double>(received) * f_ * h;
  const double fc1_flops = 2.0 * static_cast<double>(received) * fc1_ * h;
  Tensor d_act = k_.activation(received * f_);
  rec.compute("expert_fc2 dgrad", EventCategory::kGemm, fc2_flops, 0.0, [&] {
    each_expert(a, [&](int l, i64 first, i64 rows) {
      dev.gemm(one_gemm(N, T, rows, f_, h, rows_of(d_out.view(), first, rows, h), h, expert_view(unit, w, l).fc2_weight,
                        h, rows_of(d_act.view(), first, rows, f_), f_));
    });
  });
  rec.compute("expert_fc2 wgrad", EventCategory::kGemm, fc2_flops, 0.0, [&] {
    each_expert(a, [&](int l, i64 first, i64 rows) {
      const ExpertView dv = expert_view(unit, g, l);
      const TensorView d_rows = rows_of(d_out.view(), first, rows, h);
      dev.gemm(one_gemm(T, N, f_, h, rows, rows_of(a.act_out.view(), first, rows, f_), f_, d_rows, h, dv.fc2_weight, h,
                        1.0f));
      if (dv.fc2_bias.numel > 0) dev.bias_backward(d_rows, rows, h, dv.fc2_bias);
    });
  });
  d_out = Tensor();
  a.act_out = Tensor();
  Tensor d_fc1 = k_.activation(received * fc1_);
  rec.compute(s.swiglu ? "expert_swiglu bwd" : "expert_gelu bwd", EventCategory::kElementwise, 0.0,
              2.0 * static_cast<double>(a.fc1_out.view().bytes() + d_act.view().bytes()), [&] {
                if (received == 0) return;
                if (s.swiglu) {
                  dev.swiglu_backward(d_act.view(), a.fc1_out.view(), received, f_, d_fc1.view());
                } else {
                  dev.gelu_backward(d_act.view(), a.fc1_out.view(), d_fc1.view());
                }
              });
  d_act = Tensor();
  a.fc1_out = Tensor();
  Tensor d_in = k_.activation(received * h);
  rec.compute("expert_fc1 dgrad", EventCategory::kGemm, fc1_flops, 0.0, [&] {
    each_expert(a, [&](int l, i64 first, i64 rows) {
      dev.gemm(one_gemm(N, N, rows, h, fc1_, rows_of(d_fc1.view(), first, rows, fc1_), fc1_,
                        expert_view(unit, w, l).fc1_weight, h, rows_of(d_in.view(), first, rows, h), h));
    });
  });
  rec.compute("expert_fc1 wgrad", EventCategory::kGemm, fc1_flops, 0.0, [&] {
    each_expert(a, [&](int l, i64 first, i64 rows) {
      const ExpertView dv = expert_view(unit, g, l);
      const TensorView d_rows = rows_of(d_fc1.view(), first, rows, fc1_);
      dev.gemm(one_gemm(T, N, fc1_, h, rows, d_rows, fc1_, rows_of(a.expert_in.view(), first, rows, h), h,
                        dv.fc1_weight, h, 1.0f));
      if (dv.fc1_bias.numel > 0) dev.bias_backward(d_rows, rows, fc1_, dv.fc1_bias);
    });
  });
  a.expert_in = Tensor();
  return d_in;
}

// The router: its logits' gradient from the gates' (and the load-balancing
// loss's), and the input's gradient through it added to dx.
void MoeMlp::router_backward(const TensorView& router, const TensorView& router_grad, const TensorView& x,
                             const Tensor& gate_grad, const Tensor& dx, MoeActivations& a) {
  const Shapes& s = k_.shapes();
  Device& dev = k_.device();
  const i64 tokens = s.local_tokens;
  const i64 h = s.h;
  const std::vector<float> logit_grads =
      router_logit_grads(a.routing, a.logits, download_fp32(dev, gate_grad.view()), aux_coeff_, aux_grad_scale_,
                         a.balance);
  Tensor d_logits = k_.activation(tokens * experts_);
  upload_fp32(dev, logit_grads, d_logits.view());
  Tensor dx_router = k_.activation(tokens * h);
  k_.column_dgrad("router dgrad", d_logits.view(), router, tokens, h, experts_, dx_router.view());
  k_.column_wgrad("router wgrad", d_logits.view(), x, tokens, h, experts_, router_grad, {});
  k_.recorder().compute("router dgrad add", EventCategory::kElementwise, 0.0,
                        3.0 * static_cast<double>(dx.view().bytes()),
                        [&] { dev.add(dx.view(), dx_router.view(), dx.view()); });
}

}  // namespace strata::rt
