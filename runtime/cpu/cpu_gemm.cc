// GEMM on the cpu backend: Eigen's blocked, vectorized (and, with several
// threads, OpenMP-parallel) matrix product over row-major maps with strides.
#include <Eigen/Core>

#include "runtime/cpu/cpu_device_impl.h"
#include "runtime/device/kernel_checks.h"

namespace strata::rt {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMatrix, Eigen::Unaligned, Eigen::OuterStride<>>;
using MutMap = Eigen::Map<RowMatrix, Eigen::Unaligned, Eigen::OuterStride<>>;

// C = alpha * opA * opB + beta * C; C is not read when beta == 0 (BLAS semantics).
template <class OpA, class OpB>
void multiply(const OpA& a, const OpB& b, float alpha, float beta, MutMap& c) {
  if (beta == 0.0f) {
    c.noalias() = alpha * a * b;
  } else {
    if (beta != 1.0f) c *= beta;
    c.noalias() += alpha * a * b;
  }
}

}  // namespace

void CpuDevice::gemm(const GemmArgs& g) {
  check::gemm(g);
  check::dtype("gemm", "A", g.a, DType::kFp32);
  check::dtype("gemm", "C", g.c, DType::kFp32);
  if (g.m == 0 || g.n == 0) return;
  const bool ta = g.trans_a == Transpose::kYes;
  const bool tb = g.trans_b == Transpose::kYes;
  const auto* a_base = static_cast<const float*>(g.a.data);
  const auto* b_base = static_cast<const float*>(g.b.data);
  auto* c_base = static_cast<float*>(g.c.data);
  for (std::int64_t i = 0; i < g.batch; ++i) {
    MutMap c(c_base + i * g.stride_c, g.m, g.n, Eigen::OuterStride<>(g.ldc));
    if (g.k == 0) {  // an empty sum: C = beta * C
      if (g.beta == 0.0f) c.setZero(); else c *= g.beta;
      continue;
    }
    ConstMap a(a_base + i * g.stride_a, ta ? g.k : g.m, ta ? g.m : g.k, Eigen::OuterStride<>(g.lda));
    ConstMap b(b_base + i * g.stride_b, tb ? g.n : g.k, tb ? g.k : g.n, Eigen::OuterStride<>(g.ldb));
    if (!ta && !tb) multiply(a, b, g.alpha, g.beta, c);
    else if (ta && !tb) multiply(a.transpose(), b, g.alpha, g.beta, c);
    else if (!ta && tb) multiply(a, b.transpose(), g.alpha, g.beta, c);
    else multiply(a.transpose(), b.transpose(), g.alpha, g.beta, c);
  }
}

}  // namespace strata::rt
