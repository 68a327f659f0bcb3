// Vocab-parallel embedding and cross-entropy, forward and backward, on the cuda
// backend. Embedding gradients: one thread per column adds the tokens in order.
#include "runtime/cuda/cuda_kernel_util.cuh"

namespace strata::rt {
namespace {

using namespace cuda_detail;

// ---- Embedding and cross-entropy -------------------------------------------------------

template <class T>
__global__ void embedding_fwd(const int* ids, const T* table, T* out, i64 tokens, i64 rows,
                              i64 h, i64 start) {
  const i64 n = tokens * h;
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<i64>(gridDim.x) * blockDim.x) {
    const i64 row = static_cast<i64>(ids[i / h]) - start;
    out[i] = (row >= 0 && row < rows) ? table[row * h + i % h] : from_f<T>(0.0f);
  }
}

template <class T>
__global__ void embedding_bwd(const int* ids, const T* dout, float* dtable, i64 tokens, i64 rows,
                              i64 h, i64 start) {
  const i64 c = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= h) return;
  for (i64 t = 0; t < tokens; ++t) {  // token order: repeated ids add in a fixed order
    const i64 row = static_cast<i64>(ids[t]) - start;
    if (row >= 0 && row < rows) dtable[row * h + c] += to_f(dout[t * h + c]);
  }
}

template <class T>
__global__ void row_max_kernel(const T* logits, float* row_max, i64 cols) {
  const i64 r = blockIdx.x;
  float m = -INFINITY;
  for (i64 c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, to_f(logits[r * cols + c]));
  const float mx = block_max<kBlock>(m);
  if (threadIdx.x == 0) row_max[r] = mx;
}

template <class T>
__global__ void ce_partials(const T* logits, const int* labels, const float* row_max,
                            float* sum_exp, float* target, i64 cols, i64 start) {
  const i64 r = blockIdx.x;
  const float mx = row_max[r];
  float s = 0.0f;
  for (i64 c = threadIdx.x; c < cols; c += blockDim.x) s += expf(to_f(logits[r * cols + c]) - mx);
  const float total = block_sum<kBlock>(s);
  if (threadIdx.x == 0) {
    sum_exp[r] = total;
    const i64 col = static_cast<i64>(labels[r]) - start;
    target[r] = (col >= 0 && col < cols) ? to_f(logits[r * cols + col]) : 0.0f;
  }
}

__global__ void ce_loss(const float* row_max, const float* sum_exp, const float* target,
                        float* loss, i64 tokens) {
  const i64 t = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t < tokens) loss[t] = logf(sum_exp[t]) + row_max[t] - target[t];
}

template <class T>
__global__ void ce_bwd(const T* logits, const int* labels, const float* row_max,
                       const float* sum_exp, T* dlogits, i64 tokens, i64 cols, i64 start,
                       float grad_scale) {
  const i64 n = tokens * cols;
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<i64>(gridDim.x) * blockDim.x) {
    const i64 t = i / cols;
    const i64 c = i % cols;
    float d = expf(to_f(logits[i]) - row_max[t]) * (grad_scale / sum_exp[t]);
    if (static_cast<i64>(labels[t]) - start == c) d -= grad_scale;
    dlogits[i] = from_f<T>(d);
  }
}


}  // namespace

void CudaDevice::embedding_forward(const IndexView& ids, const TensorView& table,
                                   std::int64_t vocab_rows, std::int64_t h,
                                   std::int64_t vocab_start, const TensorView& out) {
  const char* k = "embedding_forward";
  check::positive(k, "h", h);
  check::non_negative(k, "vocab_rows", vocab_rows);
  check::count(k, "ids", ids, ids.count);
  activation(k, "table", table, vocab_rows * h);
  activation(k, "out", out, ids.count * h);
  check::same_dtype(k, "table", table, "out", out);
  if (ids.count == 0) return;
  activate();
  dispatch(table.dtype, [&](auto tag) {
    using T = decltype(tag);
    embedding_fwd<T><<<blocks_for(ids.count * h), kBlock, 0, stream_>>>(
        ids.data, ptr<T>(table), ptr<T>(out), ids.count, vocab_rows, h, vocab_start);
  });
  launched(k);
}

void CudaDevice::embedding_backward(const IndexView& ids, const TensorView& dout,
                                    std::int64_t vocab_rows, std::int64_t h,
                                    std::int64_t vocab_start, const TensorView& dtable) {
  const char* k = "embedding_backward";
  check::positive(k, "h", h);
  check::non_negative(k, "vocab_rows", vocab_rows);
  activation(k, "dout", dout, ids.count * h);
  stat(k, "dtable", dtable, vocab_rows * h);
  if (ids.count == 0) return;
  activate();
  dispatch(dout.dtype, [&](auto tag) {
    using T = decltype(tag);
    embedding_bwd<T><<<column_blocks(h), kBlock, 0, stream_>>>(
        ids.data, ptr<T>(dout), mfptr(dtable), ids.count, vocab_rows, h, vocab_start);
  });
  launched(k);
}

void CudaDevice::cross_entropy_row_max(const TensorView& logits, std::int64_t tokens,
                                       std::int64_t vocab_cols, const TensorView& row_max) {
  const char* k = "cross_entropy_row_max";
  check::positive(k, "vocab_cols", vocab_cols);
  check::non_negative(k, "tokens", tokens);
  activation(k, "logits", logits, tokens * vocab_cols);
  stat(k, "row_max", row_max, tokens);
  if (tokens == 0) return;
  activate();
  dispatch(logits.dtype, [&](auto tag) {
    using T = decltype(tag);
    row_max_kernel<T><<<static_cast<unsigned>(tokens), kBlock, 0, stream_>>>(
        ptr<T>(logits), mfptr(row_max), vocab_cols);
  });
  launched(k);
}

void CudaDevice::cross_entropy_partials(const TensorView& logits, const IndexView& labels,
                                        std::int64_t tokens, std::int64_t vocab_cols,
                                        std::int64_t vocab_start, const TensorView& row_max,
                                        const TensorView& sum_exp,
                                        const TensorView& target_logit) {
  const char* k = "cross_entropy_partials";
  check::positive(k, "vocab_cols", vocab_cols);
  check::non_negative(k, "tokens", tokens);
  check::count(k, "labels", labels, tokens);
  activation(k, "logits", logits, tokens * vocab_cols);
  stat(k, "row_max", row_max, tokens);
  stat(k, "sum_exp", sum_exp, tokens);
  stat(k, "target_logit", target_logit, tokens);
  if (tokens == 0) return;
  activate();
  dispatch(logits.dtype, [&](auto tag) {
    using T = decltype(tag);
    ce_partials<T><<<static_cast<unsigned>(tokens), kBlock, 0, stream_>>>(
        ptr<T>(logits), labels.data, fptr(row_max), mfptr(sum_exp), mfptr(target_logit),
        vocab_cols, vocab_start);
  });
  launched(k);
}

void CudaDevice::cross_entropy_loss(const TensorView& row_max, const TensorView& sum_exp,
                                    const TensorView& target_logit, std::int64_t tokens,
                                    const TensorView& loss) {
  const char* k = "cross_entropy_loss";
  check::non_negative(k, "tokens", tokens);
  stat(k, "row_max", row_max, tokens);
  stat(k, "sum_exp", sum_exp, tokens);
  stat(k, "target_logit", target_logit, tokens);
  stat(k, "loss", loss, tokens);
  if (tokens == 0) return;
  activate();
  ce_loss<<<column_blocks(tokens), kBlock, 0, stream_>>>(fptr(row_max), fptr(sum_exp),
                                                         fptr(target_logit), mfptr(loss), tokens);
  launched(k);
}

void CudaDevice::cross_entropy_backward(const TensorView& logits, const IndexView& labels,
                                        const TensorView& row_max, const TensorView& sum_exp,
                                        std::int64_t tokens, std::int64_t vocab_cols,
                                        std::int64_t vocab_start, float grad_scale,
                                        const TensorView& dlogits) {
  const char* k = "cross_entropy_backward";
  check::positive(k, "vocab_cols", vocab_cols);
  check::non_negative(k, "tokens", tokens);
  check::count(k, "labels", labels, tokens);
  activation(k, "logits", logits, tokens * vocab_cols);
  activation(k, "dlogits", dlogits, tokens * vocab_cols);
  check::same_dtype(k, "logits", logits, "dlogits", dlogits);
  stat(k, "row_max", row_max, tokens);
  stat(k, "sum_exp", sum_exp, tokens);
  if (tokens == 0) return;
  activate();
  dispatch(logits.dtype, [&](auto tag) {
    using T = decltype(tag);
    ce_bwd<T><<<blocks_for(tokens * vocab_cols), kBlock, 0, stream_>>>(
        ptr<T>(logits), labels.data, fptr(row_max), fptr(sum_exp), ptr<T>(dlogits), tokens,
        vocab_cols, vocab_start, grad_scale);
  });
  launched(k);
}


}  // namespace strata::rt
