// The cuda backend's memory-bound kernels, forward and backward. Every kernel
// loads its storage dtype (bf16, fp16, fp32), computes in fp32 and rounds once
// on store. Determinism: row reductions use cub::BlockReduce over a fixed block
// size; column reductions (dgamma, dbias, dtable) give one thread per column that
// walks the rows in order; no atomics anywhere.
#include <cmath>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cub/block/block_reduce.cuh>

#include "runtime/cuda/cuda_device_impl.h"
#include "runtime/kernel_checks.h"
#include "runtime/random.h"

namespace strata::rt {
namespace {

using i64 = long long;

constexpr int kBlock = 256;
// Grid-stride loops cap the grid here; more blocks add nothing once every SM is full.
constexpr i64 kMaxBlocks = 1 << 20;
// sqrt(2 / pi) and the cubic coefficient of GeLU's tanh approximation
// (Hendrycks & Gimpel 2016, sec. 2), as in the cpu backend.
constexpr float kGeluC = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }

template <class T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }

struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Calls f(T{}) with T the element type stored for dtype d.
template <class F>
void dispatch(DType d, F&& f) {
  switch (d) {
    case DType::kBf16: f(__nv_bfloat16{}); return;
    case DType::kFp16: f(__half{}); return;
    case DType::kFp32:
    case DType::kTf32: f(float{}); return;
  }
}

int blocks_for(i64 n) {
  const i64 blocks = (n + kBlock - 1) / kBlock;
  return static_cast<int>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

// Block-wide sum of v, the same value returned to every thread of the block.
template <int kThreads>
__device__ float block_sum(float v) {
  using Reduce = cub::BlockReduce<float, kThreads>;
  __shared__ typename Reduce::TempStorage storage;
  __shared__ float result;
  const float total = Reduce(storage).Sum(v);
  if (threadIdx.x == 0) result = total;
  __syncthreads();
  const float out = result;
  __syncthreads();  // storage and result are reused by the next call
  return out;
}

template <int kThreads>
__device__ float block_max(float v) {
  using Reduce = cub::BlockReduce<float, kThreads>;
  __shared__ typename Reduce::TempStorage storage;
  __shared__ float result;
  const float total = Reduce(storage).Reduce(v, MaxOp{});
  if (threadIdx.x == 0) result = total;
  __syncthreads();
  const float out = result;
  __syncthreads();
  return out;
}

// ---- Norms --------------------------------------------------------------------

template <class T>
__global__ void layernorm_fwd(const T* x, const T* gamma, const T* beta, T* y, float* mean,
                              float* rstd, i64 cols, float eps) {
  const i64 r = blockIdx.x;
  const T* xr = x + r * cols;
  float s = 0.0f;
  for (i64 c = threadIdx.x; c < cols; c += blockDim.x) s += to_f(xr[c]);
  const float mu = block_sum<kBlock>(s) / static_cast<float>(cols);
  float q = 0.0f;
  for (i64 c = threadIdx.x; c < cols; c += blockDim.x) {
    const float d = to_f(xr[c]) - mu;
    q += d * d;
  }
  const float inv = rsqrtf(block_sum<kBlock>(q) / static_cast<float>(cols) + eps);
  for (i64 c = threadIdx.x; c < cols; c += blockDim.x) {
    float v = (to_f(xr[c]) - mu) * inv * to_f(gamma[c]);
    if (beta != nullptr) v += to_f(beta[c]);
    y[r * cols + c] = from_f<T>(v);
  }
  if (threadIdx.x == 0) {
    mean[r] = mu;
    rstd[r] = inv;
  }
}

// dgamma[c] += sum_r dy * xhat; dbeta[c] += sum_r dy (rows in order).
template <class T>
__global__ void layernorm_param_grad(const T* dy, const T* x, const float* mean, const float* rstd,
                                     float* dgamma, float* dbeta, i64 rows, i64 cols) {
  const i64 c = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float dg = 0.0f;
  float db = 0.0f;
  for (i64 r = 0; r < rows; ++r) {
    const float d = to_f(dy[r * cols + c]);
    dg += d * (to_f(x[r * cols + c]) - mean[r]) * rstd[r];
    db += d;
  }
  dgamma[c] += dg;
  if (dbeta != nullptr) dbeta[c] += db;
}

template <class T>
__global__ void layernorm_bwd(const T* dy, const T* x, const T* gamma, const float* mean,
                              const float* rstd, T* dx, i64 cols) {
  const i64 r = blockIdx.x;
  const float mu = mean[r];
  const float inv = rstd[r];
  float sg = 0.0f;
  float sgx = 0.0f;
  for (i64 c = threadIdx.x; c < cols; c += blockDim.x) {
    const float g = to_f(dy[r * cols + c]) * to_f(gamma[c]);
    sg += g;
    sgx += g * (to_f(x[r * cols + c]) - mu) * inv;
  }
  const float mean_g = block_sum<kBlock>(sg) / static_cast<float>(cols);
  const float mean_gx = block_sum<kBlock>(sgx) / static_cast<float>(cols);
  for (i64 c = threadIdx.x; c < cols; c += blockDim.x) {
    const float g = to_f(dy[r * cols + c]) * to_f(gamma[c]);
    const float xhat = (to_f(x[r * cols + c]) - mu) * inv;
    dx[r * cols + c] = from_f<T>(inv * (g - mean_g - xhat * mean_gx));
  }
}

template <class T>
__global__ void rmsnorm_fwd(const T* x, const T* gamma, T* y, float* rstd, i64 cols, float eps) {
  const i64 r = blockIdx.x;
  float q = 0.0f;
  for (i64 c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = to_f(x[r * cols + c]);
    q += v * v;
  }
  const float inv = rsqrtf(block_sum<kBlock>(q) / static_cast<float>(cols) + eps);
  for (i64 c = threadIdx.x; c < cols; c += blockDim.x) {
    y[r * cols + c] = from_f<T>(to_f(x[r * cols + c]) * inv * to_f(gamma[c]));
  }
  if (threadIdx.x == 0) rstd[r] = inv;
}

template <class T>
__global__ void rmsnorm_param_grad(const T* dy, const T* x, const float* rstd, float* dgamma,
                                   i64 rows, i64 cols) {
  const i64 c = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float dg = 0.0f;
  for (i64 r = 0; r < rows; ++r) dg += to_f(dy[r * cols + c]) * to_f(x[r * cols + c]) * rstd[r];
  dgamma[c] += dg;
}

template <class T>
__global__ void rmsnorm_bwd(const T* dy, const T* x, const T* gamma, const float* rstd, T* dx,
                            i64 cols) {
  const i64 r = blockIdx.x;
  const float inv = rstd[r];
  float sgx = 0.0f;
  for (i64 c = threadIdx.x; c < cols; c += blockDim.x) {
    sgx += to_f(dy[r * cols + c]) * to_f(gamma[c]) * to_f(x[r * cols + c]);
  }
  const float mean_gx = block_sum<kBlock>(sgx) / static_cast<float>(cols);
  for (i64 c = threadIdx.x; c < cols; c += blockDim.x) {
    const float g = to_f(dy[r * cols + c]) * to_f(gamma[c]);
    dx[r * cols + c] = from_f<T>(inv * (g - to_f(x[r * cols + c]) * inv * inv * mean_gx));
  }
}

// ---- Activations ----------------------------------------------------------------

template <class T>
__global__ void gelu_fwd(const T* x, T* y, i64 n) {
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<i64>(gridDim.x) * blockDim.x) {
    const float v = to_f(x[i]);
    y[i] = from_f<T>(0.5f * v * (1.0f + tanhf(kGeluC * (v + kGeluCubic * v * v * v))));
  }
}

template <class T>
__global__ void gelu_bwd(const T* dy, const T* x, T* dx, i64 n) {
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<i64>(gridDim.x) * blockDim.x) {
    const float v = to_f(x[i]);
    const float t = tanhf(kGeluC * (v + kGeluCubic * v * v * v));
    const float grad =
        0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * kGeluC * (1.0f + 3.0f * kGeluCubic * v * v);
    dx[i] = from_f<T>(to_f(dy[i]) * grad);
  }
}

template <class T>
__global__ void swiglu_fwd(const T* x, T* y, i64 rows, i64 f) {
  const i64 n = rows * f;
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<i64>(gridDim.x) * blockDim.x) {
    const i64 r = i / f;
    const i64 j = i % f;
    const float a = to_f(x[r * 2 * f + j]);
    const float b = to_f(x[r * 2 * f + f + j]);
    y[i] = from_f<T>(a / (1.0f + expf(-a)) * b);
  }
}

template <class T>
__global__ void swiglu_bwd(const T* dy, const T* x, T* dx, i64 rows, i64 f) {
  const i64 n = rows * f;
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<i64>(gridDim.x) * blockDim.x) {
    const i64 r = i / f;
    const i64 j = i % f;
    const float a = to_f(x[r * 2 * f + j]);
    const float b = to_f(x[r * 2 * f + f + j]);
    const float d = to_f(dy[i]);
    const float sig = 1.0f / (1.0f + expf(-a));
    dx[r * 2 * f + j] = from_f<T>(d * b * sig * (1.0f + a * (1.0f - sig)));
    dx[r * 2 * f + f + j] = from_f<T>(d * a * sig);
  }
}

template <class T>
__global__ void softmax_fwd(const T* x, T* y, i64 cols, i64 rows_per_matrix, float scale,
                            bool causal) {
  const i64 r = blockIdx.x;
  i64 visible = cols;
  if (causal) {
    visible = r % rows_per_matrix + cols - rows_per_matrix + 1;
    visible = visible < 0 ? 0 : (visible > cols ? cols : visible);
  }
  const T* xr = x + r * cols;
  float m = -INFINITY;
  for (i64 c = threadIdx.x; c < visible; c += blockDim.x) m = fmaxf(m, scale * to_f(xr[c]));
  const float mx = block_max<kBlock>(m);
  float s = 0.0f;
  for (i64 c = threadIdx.x; c < visible; c += blockDim.x) s += expf(scale * to_f(xr[c]) - mx);
  const float total = block_sum<kBlock>(s);
  for (i64 c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = c < visible ? expf(scale * to_f(xr[c]) - mx) / total : 0.0f;
    y[r * cols + c] = from_f<T>(v);
  }
}

template <class T>
__global__ void softmax_bwd(const T* y, const T* dy, T* dx, i64 cols, float scale) {
  const i64 r = blockIdx.x;
  float s = 0.0f;
  for (i64 c = threadIdx.x; c < cols; c += blockDim.x) {
    s += to_f(y[r * cols + c]) * to_f(dy[r * cols + c]);
  }
  const float dot = block_sum<kBlock>(s);
  for (i64 c = threadIdx.x; c < cols; c += blockDim.x) {
    const float yv = to_f(y[r * cols + c]);
    dx[r * cols + c] = from_f<T>(scale * yv * (to_f(dy[r * cols + c]) - dot));
  }
}

// ---- Elementwise and layout --------------------------------------------------------

template <class T>
__global__ void add_kernel(const T* a, const T* b, T* out, i64 n) {
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<i64>(gridDim.x) * blockDim.x) {
    out[i] = from_f<T>(to_f(a[i]) + to_f(b[i]));
  }
}

template <class T>
__global__ void add_bias_kernel(T* x, const T* bias, i64 n, i64 cols) {
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<i64>(gridDim.x) * blockDim.x) {
    x[i] = from_f<T>(to_f(x[i]) + to_f(bias[i % cols]));
  }
}

template <class T>
__global__ void column_sum_into(const T* dy, float* out, i64 rows, i64 cols) {
  const i64 c = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float s = 0.0f;
  for (i64 r = 0; r < rows; ++r) s += to_f(dy[r * cols + c]);
  out[c] += s;
}

template <class T>
__global__ void scale_kernel(T* x, float alpha, i64 n) {
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<i64>(gridDim.x) * blockDim.x) {
    x[i] = from_f<T>(alpha * to_f(x[i]));
  }
}

template <class TX, class TY>
__global__ void axpy_kernel(float alpha, const TX* x, TY* y, i64 n) {
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<i64>(gridDim.x) * blockDim.x) {
    y[i] = from_f<TY>(to_f(y[i]) + alpha * to_f(x[i]));
  }
}

template <class T>
__global__ void fill_kernel(T* x, float value, i64 n) {
  const T v = from_f<T>(value);
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<i64>(gridDim.x) * blockDim.x) {
    x[i] = v;
  }
}

template <class TS, class TD>
__global__ void convert_kernel(const TS* src, TD* dst, i64 n) {
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<i64>(gridDim.x) * blockDim.x) {
    dst[i] = from_f<TD>(to_f(src[i]));
  }
}

template <class T>
__global__ void random_kernel(T* x, unsigned long long seed, unsigned long long first, float lo,
                              float hi, i64 n) {
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<i64>(gridDim.x) * blockDim.x) {
    x[i] = from_f<T>(random_uniform(seed, first + static_cast<unsigned long long>(i), lo, hi));
  }
}

template <class T>
__global__ void permute_0213_kernel(const T* x, T* y, i64 d0, i64 d1, i64 d2, i64 d3) {
  const i64 n = d0 * d1 * d2 * d3;
  for (i64 o = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; o < n;
       o += static_cast<i64>(gridDim.x) * blockDim.x) {
    // o indexes y [d0, d2, d1, d3].
    const i64 i3 = o % d3;
    const i64 i1 = (o / d3) % d1;
    const i64 i2 = (o / (d3 * d1)) % d2;
    const i64 i0 = o / (d3 * d1 * d2);
    y[o] = x[((i0 * d1 + i1) * d2 + i2) * d3 + i3];
  }
}

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

// ---- Reductions and the optimizer ------------------------------------------------------

// Stage 1: block b sums elements b, b + kReducePartials * kBlock, ... (fixed grid).
template <class T, bool kSquare>
__global__ void reduce_partial(const T* x, i64 n, double* partials) {
  double s = 0.0;
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<i64>(gridDim.x) * blockDim.x) {
    const double v = to_f(x[i]);
    s += kSquare ? v * v : v;
  }
  using Reduce = cub::BlockReduce<double, kBlock>;
  __shared__ typename Reduce::TempStorage storage;
  const double total = Reduce(storage).Sum(s);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ void reduce_final(const double* partials, int count, float* out) {
  double s = 0.0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) s += partials[i];
  using Reduce = cub::BlockReduce<double, kBlock>;
  __shared__ typename Reduce::TempStorage storage;
  const double total = Reduce(storage).Sum(s);
  if (threadIdx.x == 0) *out = static_cast<float>(total);
}

__global__ void adam_kernel(float* w, const float* g, float* m, float* v, i64 n, float lr,
                            float beta1, float beta2, float eps, float weight_decay,
                            float correction1, float correction2) {
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<i64>(gridDim.x) * blockDim.x) {
    // torch.optim.AdamW: decay first, then the bias-corrected Adam step.
    float wi = w[i] * (1.0f - lr * weight_decay);
    const float gi = g[i];
    const float mi = beta1 * m[i] + (1.0f - beta1) * gi;
    const float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
    wi -= lr * (mi / correction1) / (sqrtf(vi / correction2) + eps);
    w[i] = wi;
    m[i] = mi;
    v[i] = vi;
  }
}

template <class T>
T* ptr(const TensorView& v) {
  return static_cast<T*>(v.data);
}

const float* fptr(const TensorView& v) { return static_cast<const float*>(v.data); }
float* mfptr(const TensorView& v) { return static_cast<float*>(v.data); }

void launched(const char* kernel) { cuda_check(cudaGetLastError(), kernel); }

// Activation dtypes the cuda kernels accept.
void activation(const char* kernel, const char* name, const TensorView& v, i64 numel) {
  check::dtype_in(kernel, name, v, {DType::kBf16, DType::kFp16, DType::kFp32});
  check::numel(kernel, name, v, numel);
}

void stat(const char* kernel, const char* name, const TensorView& v, i64 numel) {
  check::dtype(kernel, name, v, DType::kFp32);
  check::numel(kernel, name, v, numel);
}

int column_blocks(i64 cols) { return static_cast<int>((cols + kBlock - 1) / kBlock); }

}  // namespace

void CudaDevice::layernorm_forward(const TensorView& x, const TensorView& gamma,
                                   const TensorView& beta, std::int64_t rows, std::int64_t cols,
                                   float eps, const TensorView& y, const TensorView& mean,
                                   const TensorView& rstd) {
  const char* k = "layernorm_forward";
  check::positive(k, "cols", cols);
  check::non_negative(k, "rows", rows);
  activation(k, "x", x, rows * cols);
  activation(k, "gamma", gamma, cols);
  check::same_dtype(k, "x", x, "gamma", gamma);
  if (beta.numel != 0) {
    activation(k, "beta", beta, cols);
    check::same_dtype(k, "x", x, "beta", beta);
  }
  activation(k, "y", y, rows * cols);
  check::same_dtype(k, "x", x, "y", y);
  stat(k, "mean", mean, rows);
  stat(k, "rstd", rstd, rows);
  if (rows == 0) return;
  activate();
  dispatch(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    layernorm_fwd<T><<<static_cast<unsigned>(rows), kBlock, 0, stream_>>>(
        ptr<T>(x), ptr<T>(gamma), beta.numel == 0 ? nullptr : ptr<T>(beta), ptr<T>(y),
        mfptr(mean), mfptr(rstd), cols, eps);
  });
  launched(k);
}

void CudaDevice::layernorm_backward(const TensorView& dy, const TensorView& x,
                                    const TensorView& gamma, const TensorView& mean,
                                    const TensorView& rstd, std::int64_t rows, std::int64_t cols,
                                    const TensorView& dx, const TensorView& dgamma,
                                    const TensorView& dbeta) {
  const char* k = "layernorm_backward";
  check::positive(k, "cols", cols);
  check::non_negative(k, "rows", rows);
  activation(k, "dy", dy, rows * cols);
  activation(k, "x", x, rows * cols);
  activation(k, "gamma", gamma, cols);
  activation(k, "dx", dx, rows * cols);
  check::same_dtype(k, "x", x, "dy", dy);
  check::same_dtype(k, "x", x, "gamma", gamma);
  check::same_dtype(k, "x", x, "dx", dx);
  stat(k, "mean", mean, rows);
  stat(k, "rstd", rstd, rows);
  stat(k, "dgamma", dgamma, cols);
  if (dbeta.numel != 0) stat(k, "dbeta", dbeta, cols);
  if (rows == 0) return;
  activate();
  dispatch(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    // Parameter gradients first: dx may alias dy.
    layernorm_param_grad<T><<<column_blocks(cols), kBlock, 0, stream_>>>(
        ptr<T>(dy), ptr<T>(x), fptr(mean), fptr(rstd), mfptr(dgamma),
        dbeta.numel == 0 ? nullptr : mfptr(dbeta), rows, cols);
    layernorm_bwd<T><<<static_cast<unsigned>(rows), kBlock, 0, stream_>>>(
        ptr<T>(dy), ptr<T>(x), ptr<T>(gamma), fptr(mean), fptr(rstd), ptr<T>(dx), cols);
  });
  launched(k);
}

void CudaDevice::rmsnorm_forward(const TensorView& x, const TensorView& gamma, std::int64_t rows,
                                 std::int64_t cols, float eps, const TensorView& y,
                                 const TensorView& rstd) {
  const char* k = "rmsnorm_forward";
  check::positive(k, "cols", cols);
  check::non_negative(k, "rows", rows);
  activation(k, "x", x, rows * cols);
  activation(k, "gamma", gamma, cols);
  activation(k, "y", y, rows * cols);
  check::same_dtype(k, "x", x, "gamma", gamma);
  check::same_dtype(k, "x", x, "y", y);
  stat(k, "rstd", rstd, rows);
  if (rows == 0) return;
  activate();
  dispatch(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    rmsnorm_fwd<T><<<static_cast<unsigned>(rows), kBlock, 0, stream_>>>(
        ptr<T>(x), ptr<T>(gamma), ptr<T>(y), mfptr(rstd), cols, eps);
  });
  launched(k);
}

void CudaDevice::rmsnorm_backward(const TensorView& dy, const TensorView& x,
                                  const TensorView& gamma, const TensorView& rstd,
                                  std::int64_t rows, std::int64_t cols, const TensorView& dx,
                                  const TensorView& dgamma) {
  const char* k = "rmsnorm_backward";
  check::positive(k, "cols", cols);
  check::non_negative(k, "rows", rows);
  activation(k, "dy", dy, rows * cols);
  activation(k, "x", x, rows * cols);
  activation(k, "gamma", gamma, cols);
  activation(k, "dx", dx, rows * cols);
  check::same_dtype(k, "x", x, "dy", dy);
  check::same_dtype(k, "x", x, "gamma", gamma);
  check::same_dtype(k, "x", x, "dx", dx);
  stat(k, "rstd", rstd, rows);
  stat(k, "dgamma", dgamma, cols);
  if (rows == 0) return;
  activate();
  dispatch(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    rmsnorm_param_grad<T><<<column_blocks(cols), kBlock, 0, stream_>>>(
        ptr<T>(dy), ptr<T>(x), fptr(rstd), mfptr(dgamma), rows, cols);
    rmsnorm_bwd<T><<<static_cast<unsigned>(rows), kBlock, 0, stream_>>>(
        ptr<T>(dy), ptr<T>(x), ptr<T>(gamma), fptr(rstd), ptr<T>(dx), cols);
  });
  launched(k);
}

void CudaDevice::gelu_forward(const TensorView& x, const TensorView& y) {
  const char* k = "gelu_forward";
  activation(k, "x", x, x.numel);
  activation(k, "y", y, x.numel);
  check::same_dtype(k, "x", x, "y", y);
  if (x.numel == 0) return;
  activate();
  dispatch(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    gelu_fwd<T><<<blocks_for(x.numel), kBlock, 0, stream_>>>(ptr<T>(x), ptr<T>(y), x.numel);
  });
  launched(k);
}

void CudaDevice::gelu_backward(const TensorView& dy, const TensorView& x, const TensorView& dx) {
  const char* k = "gelu_backward";
  activation(k, "x", x, x.numel);
  activation(k, "dy", dy, x.numel);
  activation(k, "dx", dx, x.numel);
  check::same_dtype(k, "x", x, "dy", dy);
  check::same_dtype(k, "x", x, "dx", dx);
  if (x.numel == 0) return;
  activate();
  dispatch(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    gelu_bwd<T><<<blocks_for(x.numel), kBlock, 0, stream_>>>(ptr<T>(dy), ptr<T>(x), ptr<T>(dx),
                                                             x.numel);
  });
  launched(k);
}

void CudaDevice::swiglu_forward(const TensorView& x, std::int64_t rows, std::int64_t f,
                                const TensorView& y) {
  const char* k = "swiglu_forward";
  check::positive(k, "f", f);
  check::non_negative(k, "rows", rows);
  activation(k, "x", x, rows * 2 * f);
  activation(k, "y", y, rows * f);
  check::same_dtype(k, "x", x, "y", y);
  if (rows == 0) return;
  activate();
  dispatch(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    swiglu_fwd<T><<<blocks_for(rows * f), kBlock, 0, stream_>>>(ptr<T>(x), ptr<T>(y), rows, f);
  });
  launched(k);
}

void CudaDevice::swiglu_backward(const TensorView& dy, const TensorView& x, std::int64_t rows,
                                 std::int64_t f, const TensorView& dx) {
  const char* k = "swiglu_backward";
  check::positive(k, "f", f);
  check::non_negative(k, "rows", rows);
  activation(k, "dy", dy, rows * f);
  activation(k, "x", x, rows * 2 * f);
  activation(k, "dx", dx, rows * 2 * f);
  check::same_dtype(k, "x", x, "dy", dy);
  check::same_dtype(k, "x", x, "dx", dx);
  if (rows == 0) return;
  activate();
  dispatch(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    swiglu_bwd<T><<<blocks_for(rows * f), kBlock, 0, stream_>>>(ptr<T>(dy), ptr<T>(x),
                                                                ptr<T>(dx), rows, f);
  });
  launched(k);
}

void CudaDevice::softmax_forward(const TensorView& x, std::int64_t rows, std::int64_t cols,
                                 std::int64_t rows_per_matrix, float scale, bool causal,
                                 const TensorView& y) {
  const char* k = "softmax_forward";
  check::positive(k, "cols", cols);
  check::positive(k, "rows_per_matrix", rows_per_matrix);
  check::non_negative(k, "rows", rows);
  if (rows % rows_per_matrix != 0) check::fail(k, "rows is not a multiple of rows_per_matrix");
  activation(k, "x", x, rows * cols);
  activation(k, "y", y, rows * cols);
  check::same_dtype(k, "x", x, "y", y);
  if (rows == 0) return;
  activate();
  dispatch(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    softmax_fwd<T><<<static_cast<unsigned>(rows), kBlock, 0, stream_>>>(
        ptr<T>(x), ptr<T>(y), cols, rows_per_matrix, scale, causal);
  });
  launched(k);
}

void CudaDevice::softmax_backward(const TensorView& y, const TensorView& dy, std::int64_t rows,
                                  std::int64_t cols, float scale, const TensorView& dx) {
  const char* k = "softmax_backward";
  check::positive(k, "cols", cols);
  check::non_negative(k, "rows", rows);
  activation(k, "y", y, rows * cols);
  activation(k, "dy", dy, rows * cols);
  activation(k, "dx", dx, rows * cols);
  check::same_dtype(k, "y", y, "dy", dy);
  check::same_dtype(k, "y", y, "dx", dx);
  if (rows == 0) return;
  activate();
  dispatch(y.dtype, [&](auto tag) {
    using T = decltype(tag);
    softmax_bwd<T><<<static_cast<unsigned>(rows), kBlock, 0, stream_>>>(ptr<T>(y), ptr<T>(dy),
                                                                        ptr<T>(dx), cols, scale);
  });
  launched(k);
}

void CudaDevice::add(const TensorView& a, const TensorView& b, const TensorView& out) {
  const char* k = "add";
  activation(k, "a", a, a.numel);
  activation(k, "b", b, a.numel);
  activation(k, "out", out, a.numel);
  check::same_dtype(k, "a", a, "b", b);
  check::same_dtype(k, "a", a, "out", out);
  if (a.numel == 0) return;
  activate();
  dispatch(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    add_kernel<T><<<blocks_for(a.numel), kBlock, 0, stream_>>>(ptr<T>(a), ptr<T>(b), ptr<T>(out),
                                                               a.numel);
  });
  launched(k);
}

void CudaDevice::add_bias(const TensorView& x, const TensorView& bias, std::int64_t rows,
                          std::int64_t cols) {
  const char* k = "add_bias";
  check::positive(k, "cols", cols);
  check::non_negative(k, "rows", rows);
  activation(k, "x", x, rows * cols);
  activation(k, "bias", bias, cols);
  check::same_dtype(k, "x", x, "bias", bias);
  if (rows == 0) return;
  activate();
  dispatch(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    add_bias_kernel<T><<<blocks_for(rows * cols), kBlock, 0, stream_>>>(ptr<T>(x), ptr<T>(bias),
                                                                        rows * cols, cols);
  });
  launched(k);
}

void CudaDevice::bias_backward(const TensorView& dy, std::int64_t rows, std::int64_t cols,
                               const TensorView& dbias) {
  const char* k = "bias_backward";
  check::positive(k, "cols", cols);
  check::non_negative(k, "rows", rows);
  activation(k, "dy", dy, rows * cols);
  stat(k, "dbias", dbias, cols);
  activate();
  dispatch(dy.dtype, [&](auto tag) {
    using T = decltype(tag);
    column_sum_into<T><<<column_blocks(cols), kBlock, 0, stream_>>>(ptr<T>(dy), mfptr(dbias),
                                                                    rows, cols);
  });
  launched(k);
}

void CudaDevice::scale(const TensorView& x, float alpha) {
  activation("scale", "x", x, x.numel);
  if (x.numel == 0) return;
  activate();
  dispatch(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    scale_kernel<T><<<blocks_for(x.numel), kBlock, 0, stream_>>>(ptr<T>(x), alpha, x.numel);
  });
  launched("scale");
}

void CudaDevice::axpy(float alpha, const TensorView& x, const TensorView& y) {
  activation("axpy", "x", x, x.numel);
  activation("axpy", "y", y, x.numel);
  if (x.numel == 0) return;
  activate();
  dispatch(x.dtype, [&](auto xtag) {
    dispatch(y.dtype, [&](auto ytag) {
      using TX = decltype(xtag);
      using TY = decltype(ytag);
      axpy_kernel<TX, TY><<<blocks_for(x.numel), kBlock, 0, stream_>>>(alpha, ptr<TX>(x),
                                                                       ptr<TY>(y), x.numel);
    });
  });
  launched("axpy");
}

void CudaDevice::fill(const TensorView& x, float value) {
  activation("fill", "x", x, x.numel);
  if (x.numel == 0) return;
  activate();
  dispatch(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    fill_kernel<T><<<blocks_for(x.numel), kBlock, 0, stream_>>>(ptr<T>(x), value, x.numel);
  });
  launched("fill");
}

void CudaDevice::convert(const TensorView& src, const TensorView& dst) {
  activation("convert", "src", src, src.numel);
  activation("convert", "dst", dst, src.numel);
  if (src.numel == 0) return;
  activate();
  dispatch(src.dtype, [&](auto stag) {
    dispatch(dst.dtype, [&](auto dtag) {
      using TS = decltype(stag);
      using TD = decltype(dtag);
      convert_kernel<TS, TD><<<blocks_for(src.numel), kBlock, 0, stream_>>>(
          ptr<TS>(src), ptr<TD>(dst), src.numel);
    });
  });
  launched("convert");
}

void CudaDevice::fill_random(const TensorView& x, std::uint64_t seed, std::uint64_t first_index,
                             float lo, float hi) {
  if (!(lo < hi)) check::fail("fill_random", "lo must be below hi");
  activation("fill_random", "x", x, x.numel);
  if (x.numel == 0) return;
  activate();
  dispatch(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    random_kernel<T><<<blocks_for(x.numel), kBlock, 0, stream_>>>(ptr<T>(x), seed, first_index,
                                                                  lo, hi, x.numel);
  });
  launched("fill_random");
}

void CudaDevice::copy_2d(const TensorView& src, std::int64_t src_ld, const TensorView& dst,
                         std::int64_t dst_ld, std::int64_t rows, std::int64_t cols) {
  const char* k = "copy_2d";
  check::non_negative(k, "rows", rows);
  check::non_negative(k, "cols", cols);
  check::same_dtype(k, "src", src, "dst", dst);
  if (rows == 0 || cols == 0) return;
  if (src_ld < cols || dst_ld < cols) check::fail(k, "a leading dimension is below cols");
  if ((rows - 1) * src_ld + cols > src.numel || (rows - 1) * dst_ld + cols > dst.numel) {
    check::fail(k, "the block does not fit in src or dst");
  }
  activate();
  const std::size_t elem = static_cast<std::size_t>(dtype_bytes(src.dtype));
  cuda_check(cudaMemcpy2DAsync(dst.data, dst_ld * elem, src.data, src_ld * elem, cols * elem,
                               static_cast<std::size_t>(rows), cudaMemcpyDeviceToDevice, stream_),
             k);
}

void CudaDevice::permute_0213(const TensorView& x, std::int64_t d0, std::int64_t d1,
                              std::int64_t d2, std::int64_t d3, const TensorView& y) {
  const char* k = "permute_0213";
  check::non_negative(k, "d0", d0);
  check::non_negative(k, "d1", d1);
  check::non_negative(k, "d2", d2);
  check::non_negative(k, "d3", d3);
  const i64 n = d0 * d1 * d2 * d3;
  activation(k, "x", x, n);
  activation(k, "y", y, n);
  check::same_dtype(k, "x", x, "y", y);
  if (n == 0) return;
  if (x.data == y.data) check::fail(k, "x and y must not alias");
  activate();
  dispatch(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    permute_0213_kernel<T><<<blocks_for(n), kBlock, 0, stream_>>>(ptr<T>(x), ptr<T>(y), d0, d1,
                                                                  d2, d3);
  });
  launched(k);
}

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

void CudaDevice::sum(const TensorView& x, const TensorView& out) {
  activation("sum", "x", x, x.numel);
  stat("sum", "out", out, 1);
  activate();
  dispatch(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    reduce_partial<T, false><<<kReducePartials, kBlock, 0, stream_>>>(ptr<T>(x), x.numel,
                                                                      reduce_partials_);
  });
  reduce_final<<<1, kBlock, 0, stream_>>>(reduce_partials_, kReducePartials, mfptr(out));
  launched("sum");
}

void CudaDevice::sum_squares(const TensorView& x, const TensorView& out) {
  activation("sum_squares", "x", x, x.numel);
  stat("sum_squares", "out", out, 1);
  activate();
  dispatch(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    reduce_partial<T, true><<<kReducePartials, kBlock, 0, stream_>>>(ptr<T>(x), x.numel,
                                                                     reduce_partials_);
  });
  reduce_final<<<1, kBlock, 0, stream_>>>(reduce_partials_, kReducePartials, mfptr(out));
  launched("sum_squares");
}

void CudaDevice::adam_step(const TensorView& param, const TensorView& grad,
                           const TensorView& exp_avg, const TensorView& exp_avg_sq,
                           const AdamParams& p, std::int64_t step) {
  const char* k = "adam_step";
  check::positive(k, "step", step);
  stat(k, "param", param, param.numel);
  stat(k, "grad", grad, param.numel);
  stat(k, "exp_avg", exp_avg, param.numel);
  stat(k, "exp_avg_sq", exp_avg_sq, param.numel);
  if (param.numel == 0) return;
  activate();
  const float correction1 = 1.0f - std::pow(p.beta1, static_cast<float>(step));
  const float correction2 = 1.0f - std::pow(p.beta2, static_cast<float>(step));
  adam_kernel<<<blocks_for(param.numel), kBlock, 0, stream_>>>(
      mfptr(param), fptr(grad), mfptr(exp_avg), mfptr(exp_avg_sq), param.numel, p.lr, p.beta1,
      p.beta2, p.eps, p.weight_decay, correction1, correction2);
  launched(k);
}

}  // namespace strata::rt
