#include "runtime/executor/context_parallel.h"

#include <cmath>
#include <memory>
#include <string>
#include <utility>

#include "core/error.h"

namespace strata::rt {
namespace {

using i64 = std::int64_t;

TensorView from(const TensorView& v, i64 offset) { return v.slice(offset, v.numel - offset); }

// A strided batched GEMM over the query groups (device.h); accumulate: beta 1.
GemmArgs grouped(Transpose ta, Transpose tb, i64 m, i64 n, i64 k, const TensorView& a, i64 lda, i64 sa,
                 const TensorView& b, i64 ldb, i64 sb, const TensorView& c, i64 ldc, i64 sc, i64 batch,
                 bool accumulate = false) {
  return strided_batched_gemm(ta, tb, m, n, k, a, lda, sa, b, ldb, sb, c, ldc, sc, batch, accumulate ? 1.0f : 0.0f);
}

// f(sample, k) for every sample of the micro-batch and each of its two query chunks.
template <class F>
void each_query_chunk(i64 samples, F&& f) {
  for (i64 bi = 0; bi < samples; ++bi) {
    for (int k = 0; k < 2; ++k) f(bi, k);
  }
}

constexpr Transpose N = Transpose::kNo;
constexpr Transpose T = Transpose::kYes;

}  // namespace

std::vector<std::int32_t> context_parallel_positions(std::int64_t seq, int cp, int cp_rank) {
  if (cp < 1 || cp_rank < 0 || cp_rank >= cp || (cp > 1 && seq % (2 * cp) != 0)) {
    throw InternalError("context_parallel_positions: needs 0 <= cp_rank < cp and, with cp > 1, the sequence in 2 * cp "
                        "chunks");
  }
  std::vector<std::int32_t> out(static_cast<std::size_t>(seq / cp));
  if (cp == 1) {
    for (i64 j = 0; j < seq; ++j) out[static_cast<std::size_t>(j)] = static_cast<std::int32_t>(j);
    return out;
  }
  const i64 chunk = seq / (2 * cp);
  const i64 second = 2 * cp - 1 - cp_rank;
  for (i64 j = 0; j < chunk; ++j) {
    out[static_cast<std::size_t>(j)] = static_cast<std::int32_t>(cp_rank * chunk + j);
    out[static_cast<std::size_t>(chunk + j)] = static_cast<std::int32_t>(second * chunk + j);
  }
  return out;
}

ContextParallelAttention::ContextParallelAttention(Kernels& kernels, Communicator& cp, CpCommType type)
    : k_(kernels), cp_(cp), type_(type), rank_(cp.rank()), cp_size_(cp.size()) {
  const Shapes& s = k_.shapes();
  if (cp_size_ < 2 || s.seq % (2 * cp_size_) != 0) {
    throw InternalError("ContextParallelAttention: needs cp >= 2 and the sequence in 2 * cp chunks");
  }
  if (type_ == CpCommType::kA2a) throw InternalError("ContextParallelAttention: a2a is not run (run_config refuses it)");
  chunk_ = s.seq / (2 * cp_size_);
}

std::int64_t ContextParallelAttention::probs_numel() const {
  const Shapes& s = k_.shapes();
  return s.b * s.heads * chunk_ * (cols(0) + cols(1));
}

double ContextParallelAttention::gemm_flops() const {
  const Shapes& s = k_.shapes();
  return 2.0 * static_cast<double>(s.b) * s.heads * chunk_ * (cols(0) + cols(1)) * s.d;
}

std::int64_t ContextParallelAttention::kv_numel() const {
  const Shapes& s = k_.shapes();
  return s.b * 2 * s.groups * s.seq * s.d;
}

std::int64_t ContextParallelAttention::block_numel() const {
  const Shapes& s = k_.shapes();
  return 2 * s.b * 2 * s.groups * chunk_ * s.d;
}

std::int64_t ContextParallelAttention::probs_offset(i64 sample, int k) const {
  const Shapes& s = k_.shapes();
  return sample * s.heads * chunk_ * (cols(0) + cols(1)) + (k == 0 ? 0 : s.heads * chunk_ * cols(0));
}

// Each half-sample's K and V ([2 groups, chunk, d], contiguous after its Q) in a row.
void ContextParallelAttention::pack_own_kv(const TensorView& qkv4, const TensorView& block) {
  const Shapes& s = k_.shapes();
  const i64 width = 2 * s.groups * chunk_ * s.d;
  k_.device().copy_2d(from(qkv4, s.heads * chunk_ * s.d), (s.heads + 2 * s.groups) * chunk_ * s.d, block, width,
                      2 * s.b, width);
}

// Between one rank's packed block [2b, 2 groups, chunk, d] and the sequence-
// ordered K/V (or their gradients) [b, 2 groups, seq, d]: its two chunks of
// every sample, into the block (to_block) or out of it.
void ContextParallelAttention::copy_block_chunks(const TensorView& block, int rank, const TensorView& seq_major,
                                                 bool to_block) {
  const Shapes& s = k_.shapes();
  const i64 width = 2 * s.groups * chunk_ * s.d;
  each_query_chunk(s.b, [&](i64 bi, int k) {
    const TensorView packed = block.slice((2 * bi + k) * width, width);
    const TensorView in_seq = from(seq_major, bi * 2 * s.groups * s.seq * s.d + chunk_of(rank, k) * chunk_ * s.d);
    if (to_block) {
      k_.device().copy_2d(in_seq, s.seq * s.d, packed, chunk_ * s.d, 2 * s.groups, chunk_ * s.d);
    } else {
      k_.device().copy_2d(packed, chunk_ * s.d, in_seq, s.seq * s.d, 2 * s.groups, chunk_ * s.d);
    }
  });
}

void ContextParallelAttention::unpack_own_kv_grads(const TensorView& block, const TensorView& d_qkv4) {
  const Shapes& s = k_.shapes();
  const i64 width = 2 * s.groups * chunk_ * s.d;
  k_.device().copy_2d(block, width, from(d_qkv4, s.heads * chunk_ * s.d), (s.heads + 2 * s.groups) * chunk_ * s.d,
                      2 * s.b, width);
}

void ContextParallelAttention::scores(const TensorView& qkv4, const TensorView& kv, const TensorView& probs, int origin,
                                      const char* name) {
  const Shapes& s = k_.shapes();
  const i64 hpg = s.heads_per_group;
  const i64 H = s.heads + 2 * s.groups;
  // The key blocks (first chunk, columns) each query chunk computes now.
  struct Block {
    int k;
    i64 first_chunk, columns;
  };
  std::vector<Block> blocks;
  for (int k = 0; k < 2; ++k) {
    if (origin < 0) {
      blocks.push_back({k, 0, cols(k)});
      continue;
    }
    for (int kk = 0; kk < 2; ++kk) {
      const i64 key_chunk = chunk_of(origin, kk);
      if (key_chunk <= chunk_of(rank_, k)) blocks.push_back({k, key_chunk, chunk_});
    }
  }
  double flops = 0.0;
  for (const Block& bl : blocks) flops += 2.0 * static_cast<double>(s.b) * s.heads * chunk_ * bl.columns * s.d;
  if (blocks.empty()) return;
  k_.recorder().compute(name, EventCategory::kAttention, flops, 0.0, [&] {
    for (i64 bi = 0; bi < s.b; ++bi) {
      for (const Block& bl : blocks) {
        const i64 ld = cols(bl.k);
        k_.device().gemm(grouped(N, T, hpg * chunk_, bl.columns, s.d, from(qkv4, (2 * bi + bl.k) * H * chunk_ * s.d),
                                 s.d, hpg * chunk_ * s.d,
                                 from(kv, bi * 2 * s.groups * s.seq * s.d + bl.first_chunk * chunk_ * s.d), s.d,
                                 s.seq * s.d, from(probs, probs_offset(bi, bl.k) + bl.first_chunk * chunk_), ld,
                                 hpg * chunk_ * ld, s.groups));
      }
    }
  });
}

// Megatron's scale 1/sqrt(head size); each query chunk's causal mask starts at
// its own chunk: row i of chunk c sees columns up to c * chunk + i.
void ContextParallelAttention::softmax(const TensorView& probs) {
  const Shapes& s = k_.shapes();
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.d));
  k_.recorder().compute("softmax", EventCategory::kElementwise, 0.0, 2.0 * static_cast<double>(probs.bytes()), [&] {
    each_query_chunk(s.b, [&](i64 bi, int k) {
      const TensorView p = probs.slice(probs_offset(bi, k), s.heads * chunk_ * cols(k));
      k_.device().softmax_forward(p, s.heads * chunk_, cols(k), chunk_, scale, true, p);
    });
  });
}

void ContextParallelAttention::values(const TensorView& probs, const TensorView& kv, const TensorView& context4) {
  const Shapes& s = k_.shapes();
  const i64 hpg = s.heads_per_group;
  const double flops = gemm_flops();
  k_.recorder().compute("attn_values", EventCategory::kAttention, flops, 0.0, [&] {
    each_query_chunk(s.b, [&](i64 bi, int k) {
      const i64 ld = cols(k);
      k_.device().gemm(grouped(N, N, hpg * chunk_, s.d, ld, from(probs, probs_offset(bi, k)), ld, hpg * chunk_ * ld,
                               from(kv, (bi * 2 + 1) * s.groups * s.seq * s.d), s.d, s.seq * s.d,
                               from(context4, (2 * bi + k) * s.heads * chunk_ * s.d), s.d, hpg * chunk_ * s.d,
                               s.groups));
    });
  });
}

void ContextParallelAttention::cp_event(const char* name, double bytes, TimeNs start) {
  k_.recorder().add(name, EventCategory::kCp, Lane::kTpComm, bytes, start, k_.recorder().now_ns());
}

void ContextParallelAttention::exchange_kv(const TensorView& qkv4, const TensorView& kv, const TensorView& probs) {
  const i64 n = block_numel();
  if (type_ == CpCommType::kAllGather) {
    Tensor all = k_.activation(cp_size_ * n);
    const TensorView own = all.view().slice(rank_ * n, n);
    pack_own_kv(qkv4, own);
    const TimeNs start = k_.recorder().now_ns();
    cp_.all_gather(own, all.view());
    cp_event("cp all_gather K/V", static_cast<double>(all.view().bytes()), start);
    for (int q = 0; q < cp_size_; ++q) copy_block_chunks(all.view().slice(q * n, n), q, kv, false);
    scores(qkv4, kv, probs, -1, "attn_scores");
    return;
  }
  // The ring: step i computes against the block of rank (rank - i) while that
  // block travels on to the next rank and the one after it arrives.
  Tensor current = k_.activation(n);
  pack_own_kv(qkv4, current.view());
  const int next = (rank_ + 1) % cp_size_;
  const int prev = (rank_ + cp_size_ - 1) % cp_size_;
  for (int i = 0; i < cp_size_; ++i) {
    const int origin = (rank_ + cp_size_ - i) % cp_size_;
    Tensor incoming;
    std::unique_ptr<Request> step;
    const TimeNs start = k_.recorder().now_ns();
    if (i + 1 < cp_size_) {
      incoming = k_.activation(n);
      step = cp_.start_send_recv(current.view(), next, incoming.view(), prev, i);
    }
    copy_block_chunks(current.view(), origin, kv, false);
    const std::string name = "attn_scores cp step " + std::to_string(i);
    scores(qkv4, kv, probs, origin, name.c_str());
    if (step) {
      step->wait();
      cp_event("cp send/recv K/V", static_cast<double>(current.view().bytes()), start);
      current = std::move(incoming);
    }
  }
}

void ContextParallelAttention::forward(const TensorView& qkv4, const TensorView& kv, const TensorView& probs,
                                       const TensorView& context4, bool exchange) {
  if (exchange) {
    exchange_kv(qkv4, kv, probs);
  } else {
    scores(qkv4, kv, probs, -1, "attn_scores");
  }
  softmax(probs);
  values(probs, kv, context4);
}

void ContextParallelAttention::query_grads(const TensorView& kv, const TensorView& d_probs, const TensorView& d_qkv4) {
  const Shapes& s = k_.shapes();
  const i64 hpg = s.heads_per_group;
  const i64 H = s.heads + 2 * s.groups;
  const double flops = gemm_flops();
  k_.recorder().compute("attn_scores dgrad", EventCategory::kAttention, flops, 0.0, [&] {
    each_query_chunk(s.b, [&](i64 bi, int k) {
      const i64 ld = cols(k);
      k_.device().gemm(grouped(N, N, hpg * chunk_, s.d, ld, from(d_probs, probs_offset(bi, k)), ld, hpg * chunk_ * ld,
                               from(kv, bi * 2 * s.groups * s.seq * s.d), s.d, s.seq * s.d,
                               from(d_qkv4, (2 * bi + k) * H * chunk_ * s.d), s.d, hpg * chunk_ * s.d, s.groups));
    });
  });
}

// Each rank's share of the K/V gradients of every block goes to the block's
// owner: a reduce-scatter (allgather) or its ring form (p2p: at step j rank r
// passes on its running sum for block r-j-1 and adds its own share to the sum
// for block r-j-2 it receives; after cp-1 steps it holds the whole of its own).
// The first exchange overlaps the query gradient.
void ContextParallelAttention::send_kv_grads_home(const TensorView& dkv, const TensorView& d_qkv4,
                                                  const TensorView& kv, const TensorView& d_probs) {
  const i64 n = block_numel();
  Tensor parts = k_.activation(cp_size_ * n);
  auto part = [&](int q) { return parts.view().slice(q * n, n); };
  for (int q = 0; q < cp_size_; ++q) copy_block_chunks(part(q), q, dkv, true);
  if (type_ == CpCommType::kAllGather) {
    Tensor own = k_.activation(n);
    const TimeNs start = k_.recorder().now_ns();
    std::unique_ptr<Request> rs = cp_.start_reduce_scatter(parts.view(), own.view());
    query_grads(kv, d_probs, d_qkv4);
    rs->wait();
    cp_event("cp reduce_scatter dK/dV", static_cast<double>(parts.view().bytes()), start);
    unpack_own_kv_grads(own.view(), d_qkv4);
    return;
  }
  const int next = (rank_ + 1) % cp_size_;
  const int prev = (rank_ + cp_size_ - 1) % cp_size_;
  auto block = [&](int j) { return ((rank_ - j) % cp_size_ + cp_size_) % cp_size_; };
  Tensor incoming = k_.activation(n);
  for (int j = 0; j + 1 < cp_size_; ++j) {
    const TimeNs start = k_.recorder().now_ns();
    std::unique_ptr<Request> step = cp_.start_send_recv(part(block(j + 1)), next, incoming.view(), prev, j);
    if (j == 0) query_grads(kv, d_probs, d_qkv4);
    step->wait();
    cp_event("cp send/recv dK/dV", static_cast<double>(incoming.view().bytes()), start);
    const TensorView sum = part(block(j + 2));
    k_.recorder().compute("cp dK/dV accumulate", EventCategory::kElementwise, 0.0,
                          3.0 * static_cast<double>(sum.bytes()), [&] { k_.device().add(sum, incoming.view(), sum); });
  }
  unpack_own_kv_grads(part(rank_), d_qkv4);
}

void ContextParallelAttention::backward(const TensorView& qkv4, const TensorView& kv, const TensorView& probs,
                                        const TensorView& d_context4, const TensorView& d_qkv4) {
  const Shapes& s = k_.shapes();
  Device& dev = k_.device();
  const i64 hpg = s.heads_per_group;
  const i64 H = s.heads + 2 * s.groups;
  const double flops = gemm_flops();
  Tensor dkv = k_.activation(kv_numel());
  dev.fill(dkv.view(), 0.0f);
  Tensor d_probs = k_.activation(probs_numel());
  auto sample_kv = [&](i64 bi, bool values) {
    return from(kv, (bi * 2 + (values ? 1 : 0)) * s.groups * s.seq * s.d);
  };
  auto sample_dkv = [&](i64 bi, bool values) {
    return from(dkv.view(), (bi * 2 + (values ? 1 : 0)) * s.groups * s.seq * s.d);
  };
  k_.recorder().compute("attn_values dgrad", EventCategory::kAttention, flops, 0.0, [&] {
    each_query_chunk(s.b, [&](i64 bi, int k) {
      const i64 ld = cols(k);
      dev.gemm(grouped(N, T, hpg * chunk_, ld, s.d, from(d_context4, (2 * bi + k) * s.heads * chunk_ * s.d), s.d,
                       hpg * chunk_ * s.d, sample_kv(bi, true), s.d, s.seq * s.d,
                       from(d_probs.view(), probs_offset(bi, k)), ld, hpg * chunk_ * ld, s.groups));
    });
  });
  // Both query chunks add to the value gradients of the keys they saw.
  k_.recorder().compute("attn_values wgrad", EventCategory::kAttention, flops, 0.0, [&] {
    each_query_chunk(s.b, [&](i64 bi, int k) {
      const i64 ld = cols(k);
      dev.gemm(grouped(T, N, ld, s.d, hpg * chunk_, from(probs, probs_offset(bi, k)), ld, hpg * chunk_ * ld,
                       from(d_context4, (2 * bi + k) * s.heads * chunk_ * s.d), s.d, hpg * chunk_ * s.d,
                       sample_dkv(bi, true), s.d, s.seq * s.d, s.groups, true));
    });
  });
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.d));
  k_.recorder().compute("softmax bwd", EventCategory::kElementwise, 0.0, 3.0 * static_cast<double>(probs.bytes()), [&] {
    each_query_chunk(s.b, [&](i64 bi, int k) {
      const i64 n = s.heads * chunk_ * cols(k);
      const TensorView dp = d_probs.view().slice(probs_offset(bi, k), n);
      dev.softmax_backward(probs.slice(probs_offset(bi, k), n), dp, s.heads * chunk_, cols(k), scale, dp);
    });
  });
  k_.recorder().compute("attn_scores wgrad", EventCategory::kAttention, flops, 0.0, [&] {
    each_query_chunk(s.b, [&](i64 bi, int k) {
      const i64 ld = cols(k);
      dev.gemm(grouped(T, N, ld, s.d, hpg * chunk_, from(d_probs.view(), probs_offset(bi, k)), ld, hpg * chunk_ * ld,
                       from(qkv4, (2 * bi + k) * H * chunk_ * s.d), s.d, hpg * chunk_ * s.d, sample_dkv(bi, false),
                       s.d, s.seq * s.d, s.groups, true));
    });
  });
  send_kv_grads_home(dkv.view(), d_qkv4, kv, d_probs.view());
}

}  // namespace strata::rt
