#include "runtime/executor/kernels.h"

#include <fmt/format.h>

#include "core/error.h"

namespace strata::rt {

Shapes make_shapes(const ModelSpec& m, const PlanSpec& p, int tp_rank, DType storage_dtype) {
  Shapes s;
  s.tp = p.tp;
  s.b = p.micro_batch_size;
  s.cp = p.cp;
  s.seq = m.seq_length;
  s.s = m.seq_length / p.cp;
  s.tokens = s.b * s.s;
  s.sequence_parallel = p.sequence_parallel && p.tp > 1;
  s.local_tokens = s.sequence_parallel ? s.tokens / p.tp : s.tokens;
  s.h = m.hidden_size;
  s.d = m.head_dim();
  s.heads = m.num_attention_heads / p.tp;
  s.groups = m.num_query_groups / p.tp;
  s.heads_per_group = s.heads / s.groups;
  s.q_width = s.heads * s.d;
  s.kv_width = s.groups * s.d;
  s.qkv_width = s.q_width + 2 * s.kv_width;
  s.ffn = m.ffn_hidden_size / p.tp;
  s.swiglu = m.swiglu;
  s.fc1_width = m.swiglu ? 2 * s.ffn : s.ffn;
  s.shared_ffn = m.moe.moe_shared_expert_intermediate_size / p.tp;
  s.vocab = m.vocab_size / p.tp;
  s.vocab_start = static_cast<std::int64_t>(tp_rank) * s.vocab;
  s.layernorm = m.normalization == Normalization::kLayerNorm;
  s.bias = m.add_bias_linear;
  s.dtype = storage_dtype;
  return s;
}

Kernels::Kernels(Device& device, Communicator& tp, Recorder& recorder, const Shapes& shapes)
    : device_(device), tp_(tp), recorder_(recorder), shapes_(shapes) {}

void Kernels::gemm(const char* name, EventCategory category, const GemmArgs& a) {
  const double flops = 2.0 * static_cast<double>(a.m) * a.n * a.k * a.batch;
  recorder_.compute(name, category, flops, 0.0, [&] { device_.gemm(a); });
}

namespace {
// One GEMM (device.h's builder, not batched).
GemmArgs args(Transpose ta, Transpose tb, std::int64_t m, std::int64_t n, std::int64_t k, const TensorView& a,
              std::int64_t lda, const TensorView& b, std::int64_t ldb, const TensorView& c, std::int64_t ldc,
              float beta) {
  return strided_batched_gemm(ta, tb, m, n, k, a, lda, 0, b, ldb, 0, c, ldc, 0, 1, beta);
}
constexpr Transpose N = Transpose::kNo;
constexpr Transpose T = Transpose::kYes;
}  // namespace

void Kernels::column_forward(const char* name, const TensorView& x, const TensorView& w, const TensorView& bias,
                             std::int64_t rows, std::int64_t in, std::int64_t out, const TensorView& y) {
  const GemmArgs a = args(N, T, rows, out, in, x, in, w, in, y, out, 0.0f);
  const double flops = 2.0 * static_cast<double>(rows) * out * in;
  recorder_.compute(name, EventCategory::kGemm, flops, 0.0, [&] {
    device_.gemm(a);
    if (bias.numel > 0) device_.add_bias(y, bias, rows, out);
  });
}

void Kernels::column_dgrad(const char* name, const TensorView& dy, const TensorView& w, std::int64_t rows,
                           std::int64_t in, std::int64_t out, const TensorView& dx) {
  gemm(name, EventCategory::kGemm, args(N, N, rows, in, out, dy, out, w, in, dx, in, 0.0f));
}

void Kernels::column_wgrad(const char* name, const TensorView& dy, const TensorView& x, std::int64_t rows,
                           std::int64_t in, std::int64_t out, const TensorView& dw, const TensorView& dbias) {
  const GemmArgs a = args(T, N, out, in, rows, dy, out, x, in, dw, in, 1.0f);
  const double flops = 2.0 * static_cast<double>(rows) * out * in;
  recorder_.compute(name, EventCategory::kGemm, flops, 0.0, [&] {
    device_.gemm(a);
    if (dbias.numel > 0) device_.bias_backward(dy, rows, out, dbias);
  });
}

void Kernels::row_forward(const char* name, const TensorView& x, const TensorView& w, std::int64_t rows,
                          std::int64_t in, std::int64_t out, const TensorView& y) {
  gemm(name, EventCategory::kGemm, args(N, N, rows, out, in, x, in, w, out, y, out, 0.0f));
}

void Kernels::row_dgrad(const char* name, const TensorView& dy, const TensorView& w, std::int64_t rows,
                        std::int64_t in, std::int64_t out, const TensorView& dx) {
  gemm(name, EventCategory::kGemm, args(N, T, rows, in, out, dy, out, w, out, dx, in, 0.0f));
}

void Kernels::row_wgrad(const char* name, const TensorView& dy, const TensorView& x, std::int64_t rows,
                        std::int64_t in, std::int64_t out, const TensorView& dw) {
  gemm(name, EventCategory::kGemm, args(T, N, in, out, rows, x, in, dy, out, dw, out, 1.0f));
}

void Kernels::deferred_wgrad(const DeferredWgrad& w, const TensorView& dw, const TensorView& dbias) {
  if (!w.column) {
    row_wgrad(w.name, w.dy.view(), w.x.view(), w.rows, w.in, w.out, dw);
    return;
  }
  Tensor gathered;
  const TensorView x = gather_column_input(w.x.view(), gathered);
  column_wgrad(w.name, w.dy.view(), x, w.rows, w.in, w.out, dw, dbias);
}

void Kernels::norm_forward(const char* name, const TensorView& x, const TensorView& gamma, const TensorView& beta,
                           std::int64_t rows, const TensorView& y, const TensorView& mean, const TensorView& rstd) {
  const double bytes = 2.0 * static_cast<double>(x.bytes());
  recorder_.compute(name, EventCategory::kElementwise, 0.0, bytes, [&] {
    if (shapes_.layernorm) {
      device_.layernorm_forward(x, gamma, beta, rows, shapes_.h, kNormEpsilon, y, mean, rstd);
    } else {
      device_.rmsnorm_forward(x, gamma, rows, shapes_.h, kNormEpsilon, y, rstd);
    }
  });
}

void Kernels::norm_backward(const char* name, const TensorView& dy, const TensorView& x, const TensorView& gamma,
                            const TensorView& mean, const TensorView& rstd, std::int64_t rows, const TensorView& dx,
                            const TensorView& dgamma, const TensorView& dbeta) {
  const double bytes = 3.0 * static_cast<double>(x.bytes());
  recorder_.compute(name, EventCategory::kElementwise, 0.0, bytes, [&] {
    if (shapes_.layernorm) {
      device_.layernorm_backward(dy, x, gamma, mean, rstd, rows, shapes_.h, dx, dgamma, dbeta);
    } else {
      device_.rmsnorm_backward(dy, x, gamma, rstd, rows, shapes_.h, dx, dgamma);
    }
  });
}

void Kernels::tp_event(const char* name, double bytes, TimeNs start) {
  recorder_.add(name, EventCategory::kTp, Lane::kTpComm, bytes, start, recorder_.now_ns());
}

void Kernels::tp_all_reduce(const TensorView& x, ReduceOp op) {
  if (tp_.size() == 1) return;
  const TimeNs start = recorder_.now_ns();
  tp_.all_reduce(x, x, op);
  tp_event("all_reduce", static_cast<double>(x.bytes()), start);
}

void Kernels::tp_all_gather(const TensorView& local, const TensorView& full) {
  const TimeNs start = recorder_.now_ns();
  tp_.all_gather(local, full);
  tp_event("all_gather", static_cast<double>(full.bytes()), start);
}

void Kernels::tp_reduce_scatter(const TensorView& full, const TensorView& local) {
  const TimeNs start = recorder_.now_ns();
  tp_.reduce_scatter(full, local);
  tp_event("reduce_scatter", static_cast<double>(full.bytes()), start);
}

Tensor Kernels::reduce_row_output(Tensor partial) {
  if (!shapes_.sequence_parallel) {
    tp_all_reduce(partial.view());
    return partial;
  }
  Tensor local = activation(shapes_.local_tokens * shapes_.h);
  tp_reduce_scatter(partial.view(), local.view());
  return local;
}

TensorView Kernels::gather_column_input(const TensorView& stream, Tensor& gathered) {
  if (!shapes_.sequence_parallel) return stream;
  gathered = activation(shapes_.tokens * shapes_.h);
  tp_all_gather(stream, gathered.view());
  return gathered.view();
}

Tensor Kernels::reduce_column_input_grad(Tensor grad) { return reduce_row_output(std::move(grad)); }

TensorView Kernels::gather_row_output_grad(const TensorView& grad, Tensor& gathered) {
  return gather_column_input(grad, gathered);
}

}  // namespace strata::rt
