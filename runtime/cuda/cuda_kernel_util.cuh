// Helpers shared by the cuda backend's kernel files (.cu only): element loads
// and stores in fp32, dtype dispatch, block reductions, launch sizes and the
// argument checks every kernel makes. Private to runtime/cuda.
#pragma once

#include <cmath>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cub/block/block_reduce.cuh>

#include "runtime/cuda/cuda_device_impl.h"
#include "runtime/device/kernel_checks.h"

namespace strata::rt::cuda_detail {

using i64 = long long;

constexpr int kBlock = 256;
// Grid-stride loops cap the grid here; more blocks add nothing once every SM is full.
constexpr i64 kMaxBlocks = 1 << 20;

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

inline int blocks_for(i64 n) {
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


template <class T>
T* ptr(const TensorView& v) {
  return static_cast<T*>(v.data);
}

inline const float* fptr(const TensorView& v) { return static_cast<const float*>(v.data); }
inline float* mfptr(const TensorView& v) { return static_cast<float*>(v.data); }

inline void launched(const char* kernel) { cuda_check(cudaGetLastError(), kernel); }

// Activation dtypes the cuda kernels accept.
inline void activation(const char* kernel, const char* name, const TensorView& v, i64 numel) {
  check::dtype_in(kernel, name, v, {DType::kBf16, DType::kFp16, DType::kFp32});
  check::numel(kernel, name, v, numel);
}

inline void stat(const char* kernel, const char* name, const TensorView& v, i64 numel) {
  check::dtype(kernel, name, v, DType::kFp32);
  check::numel(kernel, name, v, numel);
}

inline int column_blocks(i64 cols) { return static_cast<int>((cols + kBlock - 1) / kBlock); }

}  // namespace strata::rt::cuda_detail
