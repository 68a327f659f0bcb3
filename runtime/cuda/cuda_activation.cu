// GeLU, SwiGLU and the scaled, causally masked softmax, forward and backward,
// on the cuda backend.
#include "runtime/cuda/cuda_kernel_util.cuh"

namespace strata::rt {
namespace {

using namespace cuda_detail;

// sqrt(2 / pi) and the cubic coefficient of GeLU's tanh approximation
// (Hendrycks & Gimpel 2016, sec. 2), as in the cpu backend.
constexpr float kGeluC = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

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


}  // namespace

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


}  // namespace strata::rt
