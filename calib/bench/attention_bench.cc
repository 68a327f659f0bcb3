#include "calib/bench/attention_bench.h"

#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "runtime/device/tensor_io.h"

namespace strata::calib {
namespace {

// A batched row-major GEMM over bh matrices, contiguous per head.
rt::GemmArgs batched(rt::Transpose ta, rt::Transpose tb, std::int64_t m, std::int64_t n,
                     std::int64_t k, const rt::TensorView& a, const rt::TensorView& b,
                     const rt::TensorView& c, std::int64_t bh) {
  return rt::strided_batched_gemm(ta, tb, m, n, k, a, ta == rt::Transpose::kNo ? k : m, m * k, b,
                                  tb == rt::Transpose::kNo ? n : k, k * n, c, n, m * n, bh);
}

}  // namespace

std::vector<AttentionPoint> bench_attention(rt::Device& device,
                                            const std::vector<AttentionQuery>& shapes,
                                            const TimingOptions& timing,
                                            const std::function<void(std::size_t)>& progress) {
  std::vector<AttentionPoint> out;
  std::uint64_t seed = 5000;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const AttentionQuery& q = shapes[i];
    const std::int64_t bh = q.batch_heads, s = q.seq, d = q.head_dim;
    auto tensor = [&](std::int64_t numel) {
      rt::Tensor t = device.allocate_tensor(numel, q.dtype);
      device.fill_random(t.view(), seed++, 0, -1.0f, 1.0f);
      return t;
    };
    rt::Tensor qt = tensor(bh * s * d), kt = tensor(bh * s * d), vt = tensor(bh * s * d);
    rt::Tensor o = tensor(bh * s * d), dout = tensor(bh * s * d);
    rt::Tensor dq = tensor(bh * s * d), dk = tensor(bh * s * d), dv = tensor(bh * s * d);
    rt::Tensor scores = tensor(bh * s * s), probs = tensor(bh * s * s), dprobs = tensor(bh * s * s);
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    using rt::Transpose;
    const rt::GemmArgs qk = batched(Transpose::kNo, Transpose::kYes, s, s, d, qt.view(), kt.view(), scores.view(), bh);
    const rt::GemmArgs pv = batched(Transpose::kNo, Transpose::kNo, s, d, s, probs.view(), vt.view(), o.view(), bh);
    const rt::GemmArgs dv_g = batched(Transpose::kYes, Transpose::kNo, s, d, s, probs.view(), dout.view(), dv.view(), bh);
    const rt::GemmArgs dp_g = batched(Transpose::kNo, Transpose::kYes, s, s, d, dout.view(), vt.view(), dprobs.view(), bh);
    const rt::GemmArgs dq_g = batched(Transpose::kNo, Transpose::kNo, s, d, s, dprobs.view(), kt.view(), dq.view(), bh);
    const rt::GemmArgs dk_g = batched(Transpose::kYes, Transpose::kNo, s, d, s, dprobs.view(), qt.view(), dk.view(), bh);
    auto forward = [&] {
      device.gemm(qk);
      device.softmax_forward(scores.view(), bh * s, s, s, scale, false, probs.view());
      device.gemm(pv);
    };
    auto backward = [&] {
      device.gemm(dv_g);
      device.gemm(dp_g);
      device.softmax_backward(probs.view(), dprobs.view(), bh * s, s, scale, dprobs.view());
      device.gemm(dq_g);
      device.gemm(dk_g);
    };
    const Timing fwd = time_on_device(device, forward, timing);
    forward();  // backward reads the probabilities of a forward pass
    const Timing bwd = time_on_device(device, backward, timing);
    device.synchronize();
    const std::vector<float> row = rt::download_fp32(device, probs.view().slice(0, s));
    double sum = 0.0;
    for (float p : row) sum += p;
    if (!(std::abs(sum - 1.0) < 1e-2)) {
      throw InternalError(fmt::format("attention softmax row sums to {}, not 1", sum));
    }
    for (const rt::Tensor* t : {&o, &dq, &dk, &dv}) {
      for (float x : rt::download_fp32(device, t->view().slice(0, std::min<std::int64_t>(d, 64)))) {
        if (!std::isfinite(x)) throw InternalError(fmt::format("attention produced {}", x));
      }
    }
    out.push_back({q.dtype, bh, s, d, false, false, fwd.median_s, fwd.spread});
    out.push_back({q.dtype, bh, s, d, false, true, bwd.median_s, bwd.spread});
    if (progress) progress(i);
  }
  return out;
}

}  // namespace strata::calib
