// Token routing (an MoE layer's dispatch, combine and gate gradients) on the cuda backend.
#include "runtime/cuda/cuda_kernel_util.cuh"

namespace strata::rt {
namespace {

using namespace cuda_detail;

// ---- Token routing ---------------------------------------------------------------------

// Indices live on the device, so the host cannot check them against src's rows
// without a copy and a sync; an out-of-range index is the caller's bug (the cpu
// backend reports it), and here it is skipped like a negative one rather than
// read out of bounds.
__device__ __forceinline__ bool routed(int idx, i64 src_rows) {
  return idx >= 0 && static_cast<i64>(idx) < src_rows;
}

// One thread per dst element, so neighbouring threads read neighbouring columns
// of the same src row; each sums its k entries itself in j order, which keeps
// the result deterministic without atomics.
template <class T>
__global__ void gather_sum_kernel(const T* src, const int* index, const float* weight, T* dst,
                                  i64 rows, i64 k, i64 cols, i64 src_rows) {
  const i64 n = rows * cols;
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<i64>(gridDim.x) * blockDim.x) {
    const i64 r = i / cols;
    const i64 c = i % cols;
    float s = 0.0f;
    for (i64 j = 0; j < k; ++j) {
      const int idx = index[r * k + j];
      if (!routed(idx, src_rows)) continue;
      const float x = to_f(src[static_cast<i64>(idx) * cols + c]);
      s += weight ? weight[r * k + j] * x : x;
    }
    dst[i] = from_f<T>(s);
  }
}

// One block per output (grid-stride past kMaxBlocks): each thread sums a fixed
// set of columns, then the block's fixed tree reduction adds them, so the order
// depends only on cols and kBlock. idx is the same for the whole block, so the
// early continue never splits the block around block_sum's barriers.
template <class T>
__global__ void gather_dots_kernel(const T* a, const T* b, const int* index, float* out, i64 n,
                                   i64 k, i64 cols, i64 b_rows) {
  for (i64 i = blockIdx.x; i < n; i += gridDim.x) {
    const int idx = index[i];
    if (!routed(idx, b_rows)) {
      if (threadIdx.x == 0) out[i] = 0.0f;
      continue;
    }
    const T* ar = a + (i / k) * cols;
    const T* br = b + static_cast<i64>(idx) * cols;
    float s = 0.0f;
    for (i64 c = threadIdx.x; c < cols; c += blockDim.x) s += to_f(ar[c]) * to_f(br[c]);
    const float total = block_sum<kBlock>(s);
    if (threadIdx.x == 0) out[i] = total;
  }
}

}  // namespace

void CudaDevice::gather_sum_rows(const TensorView& src, const IndexView& index,
                                 const TensorView& weight, std::int64_t k, std::int64_t cols,
                                 const TensorView& dst) {
  const char* kn = "gather_sum_rows";
  const i64 rows = check::routed_rows(kn, index, k, "src", src, cols);
  activation(kn, "src", src, src.numel);
  activation(kn, "dst", dst, rows * cols);
  check::same_dtype(kn, "src", src, "dst", dst);
  // Empty means every weight is 1; a non-empty weight must cover every index.
  if (weight.numel != 0) stat(kn, "weight", weight, index.count);
  if (rows == 0) return;
  // Rows of dst would be read as src by other threads mid-write.
  check::disjoint(kn, "src", src, "dst", dst);
  activate();
  const float* w = weight.numel != 0 ? fptr(weight) : nullptr;
  dispatch(src.dtype, [&](auto tag) {
    using T = decltype(tag);
    gather_sum_kernel<T><<<blocks_for(rows * cols), kBlock, 0, stream_>>>(
        ptr<T>(src), index.data, w, ptr<T>(dst), rows, k, cols, src.numel / cols);
  });
  launched(kn);
}

void CudaDevice::gather_row_dots(const TensorView& a, const TensorView& b, const IndexView& index,
                                 std::int64_t k, std::int64_t cols, const TensorView& out) {
  const char* kn = "gather_row_dots";
  const i64 rows = check::routed_rows(kn, index, k, "b", b, cols);
  activation(kn, "a", a, rows * cols);
  activation(kn, "b", b, b.numel);
  check::same_dtype(kn, "a", a, "b", b);
  stat(kn, "out", out, index.count);
  if (index.count == 0) return;
  activate();
  const unsigned blocks =
      static_cast<unsigned>(index.count < kMaxBlocks ? index.count : kMaxBlocks);
  dispatch(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    gather_dots_kernel<T><<<blocks, kBlock, 0, stream_>>>(ptr<T>(a), ptr<T>(b), index.data,
                                                          mfptr(out), index.count, k, cols,
                                                          b.numel / cols);
  });
  launched(kn);
}

}  // namespace strata::rt
