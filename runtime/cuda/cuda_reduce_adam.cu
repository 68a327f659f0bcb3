// sum / sum_squares (two stages over a fixed grid, in double) and the AdamW
// step on the cuda backend.
#include "runtime/cuda/cuda_kernel_util.cuh"

namespace strata::rt {
namespace {

using namespace cuda_detail;

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

}  // namespace

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
