// Context parallelism on one rank (Megatron-Core's --context-parallel-size with
// Transformer Engine's attention; Liu et al. 2023, "Ring Attention"; the Llama 3
// paper, arXiv 2407.21783 section 3.3.2): each of the cp ranks holds seq/cp
// tokens of every sequence as two load-balanced causal chunks of seq/(2cp)
// tokens, chunk r and chunk 2cp-1-r of rank r (so every rank does the same
// causal work), and every op but the attention core runs on those tokens alone.
//
// The attention core needs every rank's keys and values:
//   p2p        forward: a ring of cp-1 steps, each step's K/V block sent on
//              while the scores against the block received before are computed;
//              backward: the K/V gradients of every block sent home round the
//              ring (a ring reduce-scatter, cp-1 steps, the first overlapping
//              the query gradient's GEMMs).
//   allgather  forward: one all-gather of K/V; backward: one reduce-scatter of dK/dV.
// The runtime's attention is explicit (scores, softmax, values: the reference
// the plans are checked against), so a query row's softmax needs all its
// columns: the gathered K/V are kept for the backward (Megatron's ring passes
// K/V round again in the backward instead, with flash attention's per-block
// softmax). a2a (Ulysses' head exchange) is not run; run_config refuses it.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/executor/kernels.h"

namespace strata::rt {

// The global position of each of a rank's seq/cp local positions: its chunks
// cp_rank and 2cp-1-cp_rank of seq/(2cp) tokens, in that order. cp == 1: 0..seq-1.
std::vector<std::int32_t> context_parallel_positions(std::int64_t seq, int cp, int cp_rank);

class ContextParallelAttention {
 public:
  ContextParallelAttention(Kernels& kernels, Communicator& cp, CpCommType type);

  // Elements of the softmax output over this rank's queries (each query chunk
  // sees the keys of every chunk up to its own).
  std::int64_t probs_numel() const;
  // Elements of every rank's K/V in sequence order, [b, 2 * groups, seq, d].
  std::int64_t kv_numel() const;

  // qkv4: this rank's Q, K, V as [2b, heads + 2 groups, chunk, d] (each sample's
  // two chunks as two rows). exchange: gather every rank's K/V into kv (else,
  // recomputing, kv holds them already). Fills probs and context4 [2b, heads, chunk, d].
  void forward(const TensorView& qkv4, const TensorView& kv, const TensorView& probs, const TensorView& context4,
               bool exchange);
  // From the forward's qkv4, kv and probs and the output's gradient d_context4:
  // d_qkv4 (overwritten), this rank's share of every rank's K/V gradients
  // summed home.
  void backward(const TensorView& qkv4, const TensorView& kv, const TensorView& probs,
                const TensorView& d_context4, const TensorView& d_qkv4);

 private:
  using i64 = std::int64_t;
  // The global chunk index of chunk k (0, 1) of rank `rank`.
  i64 chunk_of(int rank, int k) const { return k == 0 ? rank : 2 * cp_size_ - 1 - rank; }
  // Key columns query chunk k of this rank sees: every chunk up to its own.
  i64 cols(int k) const { return (chunk_of(rank_, k) + 1) * chunk_; }
  i64 probs_offset(i64 sample, int k) const;
  i64 block_numel() const;  // one rank's K/V: [2b, 2 groups, chunk, d]
  // FLOPs of one of the core's GEMMs (scores, values or a gradient of either)
  // over every query chunk and the keys it sees.
  double gemm_flops() const;

  void pack_own_kv(const TensorView& qkv4, const TensorView& block);
  void copy_block_chunks(const TensorView& block, int rank, const TensorView& seq_major, bool to_block);
  void unpack_own_kv_grads(const TensorView& block, const TensorView& d_qkv4);
  // Scores of every query chunk of this rank against the chunks of `origin`
  // that it sees (all ranks when origin < 0).
  void scores(const TensorView& qkv4, const TensorView& kv, const TensorView& probs, int origin, const char* name);
  void softmax(const TensorView& probs);
  void values(const TensorView& probs, const TensorView& kv, const TensorView& context4);
  void exchange_kv(const TensorView& qkv4, const TensorView& kv, const TensorView& probs);
  void send_kv_grads_home(const TensorView& dkv, const TensorView& d_qkv4, const TensorView& kv,
                          const TensorView& d_probs);
  void query_grads(const TensorView& kv, const TensorView& d_probs, const TensorView& d_qkv4);
  void cp_event(const char* name, double bytes, TimeNs start);

  Kernels& k_;
  Communicator& cp_;
  CpCommType type_;
  int rank_ = 0;
  int cp_size_ = 1;
  i64 chunk_ = 1;
};

}  // namespace strata::rt
