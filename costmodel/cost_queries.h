// What the simulator asks the cost model about, and the work each query does.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace strata {

// C[m x n] = A[m x k] * B[k x n], `batch` independent times.
struct GemmQuery {
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t batch = 1;
  DType dtype = DType::kBf16;
};

// Fused (flash-style) attention over batch*heads independent heads: seq queries
// against kv_seq keys and values (0: kv_seq = seq, the square of self-attention;
// context parallelism's steps are rectangles).
struct AttentionQuery {
  std::int64_t batch_heads = 0, seq = 0, head_dim = 0;
  bool causal = false;
  bool backward = false;
  DType dtype = DType::kBf16;
  std::int64_t kv_seq = 0;
};

// 2*m*n*k*batch.
double gemm_flops(const GemmQuery& q);
// Bytes a GEMM must move at least: A and B read once, C written once.
double gemm_bytes(const GemmQuery& q);
// Output tiles of tile_m x tile_n, one thread block each, spread over
// compute_units in waves: ceil(tiles / compute_units).
double gemm_waves(const GemmQuery& q, int tile_m, int tile_n, int compute_units);
// Time of the GEMM's tile waves at peak_flops_per_s (no efficiency loss): every
// wave costs as much as a full one, and every tile as much as a full tile
// (NVIDIA, "Matrix Multiplication Background User's Guide", DU-09799-001, 2023,
// §3 "Dimension Quantization Effects").
double quantized_compute_seconds(const GemmQuery& q, int tile_m, int tile_n, int compute_units,
                                 double peak_flops_per_s);

// FLOPs of fused attention as FlashAttention-2 (Dao 2023, §4.1) counts them:
// forward 4*seq^2*head_dim per head, halved with a causal mask; the backward
// pass 2.5x the forward (five matmuls against two, with recomputation).
// A rectangle seq x kv_seq counts 4*seq*kv_seq*head_dim per head.
double attention_flops(const AttentionQuery& q);
// The sequence length a rate is read at: seq for the square; for a rectangle the
// side of the square of the same work, sqrt(seq * kv_seq) (measured curves are
// squares; a kernel's efficiency follows its work per head).
double attention_rate_seq(const AttentionQuery& q);

}  // namespace strata
