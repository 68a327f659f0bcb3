// Vocab-parallel embedding and cross-entropy, forward and backward, on the cpu backend.
#include <cmath>

#include <Eigen/Core>

#include "runtime/cpu/cpu_device_impl.h"
#include "runtime/device/kernel_checks.h"

namespace strata::rt {
namespace {

using Arr = Eigen::Map<Eigen::ArrayXf>;
using ConstArr = Eigen::Map<const Eigen::ArrayXf>;

// The local row of global id `id`, or -1 when this shard does not hold it.
std::int64_t local_row(std::int32_t id, std::int64_t vocab_start, std::int64_t rows) {
  const std::int64_t row = static_cast<std::int64_t>(id) - vocab_start;
  return row >= 0 && row < rows ? row : -1;
}

}  // namespace

void CpuDevice::embedding_forward(const IndexView& ids, const TensorView& table,
                                  std::int64_t vocab_rows, std::int64_t h,
                                  std::int64_t vocab_start, const TensorView& out) {
  const char* k = "embedding_forward";
  check::positive(k, "h", h);
  check::non_negative(k, "vocab_rows", vocab_rows);
  check::count(k, "ids", ids, ids.count);
  const float* tp = f32(k, "table", table, vocab_rows * h);
  float* op = f32(k, "out", out, ids.count * h);
  for_rows(threads_, ids.count, [&](std::int64_t t) {
    const std::int64_t row = local_row(ids.data[t], vocab_start, vocab_rows);
    Arr o(op + t * h, h);
    if (row < 0) o.setZero(); else o = ConstArr(tp + row * h, h);
  });
}

void CpuDevice::embedding_backward(const IndexView& ids, const TensorView& dout,
                                   std::int64_t vocab_rows, std::int64_t h,
                                   std::int64_t vocab_start, const TensorView& dtable) {
  const char* k = "embedding_backward";
  check::positive(k, "h", h);
  check::non_negative(k, "vocab_rows", vocab_rows);
  const float* dp = f32(k, "dout", dout, ids.count * h);
  float* tp = f32(k, "dtable", dtable, vocab_rows * h);
  // Token order, one thread: repeated ids accumulate in a fixed order.
  for (std::int64_t t = 0; t < ids.count; ++t) {
    const std::int64_t row = local_row(ids.data[t], vocab_start, vocab_rows);
    if (row >= 0) Arr(tp + row * h, h) += ConstArr(dp + t * h, h);
  }
}

void CpuDevice::cross_entropy_row_max(const TensorView& logits, std::int64_t tokens,
                                      std::int64_t vocab_cols, const TensorView& row_max) {
  const char* k = "cross_entropy_row_max";
  check::positive(k, "vocab_cols", vocab_cols);
  check::non_negative(k, "tokens", tokens);
  const float* lp = f32(k, "logits", logits, tokens * vocab_cols);
  float* mp = f32(k, "row_max", row_max, tokens);
  for_rows(threads_, tokens,
           [&](std::int64_t t) { mp[t] = ConstArr(lp + t * vocab_cols, vocab_cols).maxCoeff(); });
}

void CpuDevice::cross_entropy_partials(const TensorView& logits, const IndexView& labels,
                                       std::int64_t tokens, std::int64_t vocab_cols,
                                       std::int64_t vocab_start, const TensorView& row_max,
                                       const TensorView& sum_exp,
                                       const TensorView& target_logit) {
  const char* k = "cross_entropy_partials";
  check::positive(k, "vocab_cols", vocab_cols);
  check::non_negative(k, "tokens", tokens);
  check::count(k, "labels", labels, tokens);
  const float* lp = f32(k, "logits", logits, tokens * vocab_cols);
  const float* mp = f32(k, "row_max", row_max, tokens);
  float* sp = f32(k, "sum_exp", sum_exp, tokens);
  float* tp = f32(k, "target_logit", target_logit, tokens);
  for_rows(threads_, tokens, [&](std::int64_t t) {
    ConstArr row(lp + t * vocab_cols, vocab_cols);
    sp[t] = (row - mp[t]).exp().sum();
    const std::int64_t col = local_row(labels.data[t], vocab_start, vocab_cols);
    tp[t] = col < 0 ? 0.0f : row[col];
  });
}

void CpuDevice::cross_entropy_loss(const TensorView& row_max, const TensorView& sum_exp,
                                   const TensorView& target_logit, std::int64_t tokens,
                                   const TensorView& loss) {
  const char* k = "cross_entropy_loss";
  check::non_negative(k, "tokens", tokens);
  ConstArr m(f32(k, "row_max", row_max, tokens), tokens);
  ConstArr s(f32(k, "sum_exp", sum_exp, tokens), tokens);
  ConstArr t(f32(k, "target_logit", target_logit, tokens), tokens);
  Arr(f32(k, "loss", loss, tokens), tokens) = s.log() + m - t;
}

void CpuDevice::cross_entropy_backward(const TensorView& logits, const IndexView& labels,
                                       const TensorView& row_max, const TensorView& sum_exp,
                                       std::int64_t tokens, std::int64_t vocab_cols,
                                       std::int64_t vocab_start, float grad_scale,
                                       const TensorView& dlogits) {
  const char* k = "cross_entropy_backward";
  check::positive(k, "vocab_cols", vocab_cols);
  check::non_negative(k, "tokens", tokens);
  check::count(k, "labels", labels, tokens);
  const float* lp = f32(k, "logits", logits, tokens * vocab_cols);
  const float* mp = f32(k, "row_max", row_max, tokens);
  const float* sp = f32(k, "sum_exp", sum_exp, tokens);
  float* dp = f32(k, "dlogits", dlogits, tokens * vocab_cols);
  for_rows(threads_, tokens, [&](std::int64_t t) {
    Arr d(dp + t * vocab_cols, vocab_cols);
    d = (ConstArr(lp + t * vocab_cols, vocab_cols) - mp[t]).exp() * (grad_scale / sp[t]);
    const std::int64_t col = local_row(labels.data[t], vocab_start, vocab_cols);
    if (col >= 0) d[col] -= grad_scale;
  });
}

}  // namespace strata::rt
