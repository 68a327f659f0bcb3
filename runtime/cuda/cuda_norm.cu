// LayerNorm and RMSNorm, forward and backward, on the cuda backend: loads in the
// storage dtype, fp32 arithmetic, one rounding on store.
// Determinism: no atomics; block reductions over a fixed block size
// (cub::BlockReduce), column reductions walk the rows in order.
#include "runtime/cuda/cuda_kernel_util.cuh"

namespace strata::rt {
namespace {

using namespace cuda_detail;

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


}  // namespace strata::rt
