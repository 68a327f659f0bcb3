#include "costmodel/cost_queries.h"

#include <cmath>

namespace strata {

double gemm_flops(const GemmQuery& q) {
  return 2.0 * static_cast<double>(q.m) * static_cast<double>(q.n) * static_cast<double>(q.k) *
         static_cast<double>(q.batch);
}

double gemm_bytes(const GemmQuery& q) {
  const double m = static_cast<double>(q.m), n = static_cast<double>(q.n),
               k = static_cast<double>(q.k);
  return dtype_bytes(q.dtype) * static_cast<double>(q.batch) * (m * k + k * n + m * n);
}

double gemm_waves(const GemmQuery& q, int tile_m, int tile_n, int compute_units) {
  const double tiles = std::ceil(static_cast<double>(q.m) / tile_m) *
                       std::ceil(static_cast<double>(q.n) / tile_n) * static_cast<double>(q.batch);
  return std::ceil(tiles / compute_units);
}

double quantized_compute_seconds(const GemmQuery& q, int tile_m, int tile_n, int compute_units,
                                 double peak_flops_per_s) {
  const double per_unit_flops_per_s = peak_flops_per_s / compute_units;
  const double tile_flops = 2.0 * tile_m * tile_n * static_cast<double>(q.k);
  return gemm_waves(q, tile_m, tile_n, compute_units) * tile_flops / per_unit_flops_per_s;
}

double attention_flops(const AttentionQuery& q) {
  const double s = static_cast<double>(q.seq);
  const double kv = q.kv_seq > 0 ? static_cast<double>(q.kv_seq) : s;
  double flops = 4.0 * static_cast<double>(q.batch_heads) * s * kv * static_cast<double>(q.head_dim);
  if (q.causal) flops *= 0.5;
  if (q.backward) flops *= 2.5;
  return flops;
}

double attention_rate_seq(const AttentionQuery& q) {
  if (q.kv_seq <= 0 || q.kv_seq == q.seq) return static_cast<double>(q.seq);
  return std::sqrt(static_cast<double>(q.seq) * static_cast<double>(q.kv_seq));
}

}  // namespace strata
