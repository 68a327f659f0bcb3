// Elementwise, layout and random-fill kernels on the cuda backend.
#include "runtime/device/random.h"
#include "runtime/cuda/cuda_kernel_util.cuh"

namespace strata::rt {
namespace {

using namespace cuda_detail;

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


}  // namespace

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


}  // namespace strata::rt
