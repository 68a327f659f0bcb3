#include "runtime/executor/embedding_head.h"

namespace strata::rt {

using i64 = std::int64_t;

EmbeddingHead::EmbeddingHead(Kernels& kernels) : k_(kernels) {}

Tensor EmbeddingHead::embedding_forward(const TensorView& words, const TensorView& positions, const IndexView& ids,
                                        const IndexView& position_ids) {
  const Shapes& s = k_.shapes();
  Device& dev = k_.device();
  Tensor partial = k_.activation(s.tokens * s.h);
  k_.recorder().compute("embedding", EventCategory::kElementwise, 0.0, 2.0 * static_cast<double>(partial.view().bytes()),
                        [&] { dev.embedding_forward(ids, words, s.vocab, s.h, s.vocab_start, partial.view()); });
  Tensor x = k_.reduce_row_output(std::move(partial));
  if (positions.numel > 0) {
    Tensor pos = k_.activation(s.local_tokens * s.h);
    k_.recorder().compute("position embedding", EventCategory::kElementwise, 0.0,
                          3.0 * static_cast<double>(pos.view().bytes()), [&] {
                            dev.embedding_forward(position_ids, positions, s.seq, s.h, 0, pos.view());
                            dev.add(x.view(), pos.view(), x.view());
                          });
  }
  return x;
}

void EmbeddingHead::embedding_backward(const TensorView& dx, const IndexView& ids, const IndexView& position_ids,
                                       const TensorView& d_words, const TensorView& d_positions) {
  const Shapes& s = k_.shapes();
  Device& dev = k_.device();
  if (d_positions.numel > 0) {
    k_.recorder().compute("position embedding bwd", EventCategory::kElementwise, 0.0, 2.0 * static_cast<double>(dx.bytes()),
                          [&] { dev.embedding_backward(position_ids, dx, s.seq, s.h, 0, d_positions); });
  }
  Tensor gathered;
  const TensorView d_full = k_.gather_row_output_grad(dx, gathered);
  k_.recorder().compute("embedding bwd", EventCategory::kElementwise, 0.0, 2.0 * static_cast<double>(d_full.bytes()),
                        [&] { dev.embedding_backward(ids, d_full, s.vocab, s.h, s.vocab_start, d_words); });
}

void EmbeddingHead::head_forward(const TensorView& norm_weight, const TensorView& norm_bias,
                                 const TensorView& output_weight, HeadActivations& a, const IndexView& labels,
                                 float grad_scale, const TensorView& loss_sum, const TensorView& tmp) {
  const Shapes& s = k_.shapes();
  Device& dev = k_.device();
  const i64 rows = s.local_tokens;
  a.norm = k_.activation(rows * s.h);
  if (s.layernorm) a.norm_mean = k_.fp32(rows);
  a.norm_rstd = k_.fp32(rows);
  k_.norm_forward("final_norm", a.x.view(), norm_weight, norm_bias, rows, a.norm.view(), a.norm_mean.view(),
                  a.norm_rstd.view());
  Tensor logits = k_.activation(s.tokens * s.vocab);
  {
    Tensor gathered;
    const TensorView in = k_.gather_column_input(a.norm.view(), gathered);
    k_.column_forward("logits", in, output_weight, {}, s.tokens, s.h, s.vocab, logits.view());
  }
  const i64 t = s.tokens;
  Tensor row_max = k_.fp32(t);
  Tensor sums = k_.fp32(2 * t);  // sum of exponentials, then the target logit: one all-reduce
  Tensor loss = k_.fp32(t);
  const TensorView sum_exp = sums.view().slice(0, t);
  const TensorView target = sums.view().slice(t, t);
  const double logit_bytes = static_cast<double>(logits.view().bytes());
  k_.recorder().compute("cross_entropy", EventCategory::kElementwise, 0.0, logit_bytes,
                        [&] { dev.cross_entropy_row_max(logits.view(), t, s.vocab, row_max.view()); });
  k_.tp_all_reduce(row_max.view(), ReduceOp::kMax);
  k_.recorder().compute("cross_entropy", EventCategory::kElementwise, 0.0, logit_bytes, [&] {
    dev.cross_entropy_partials(logits.view(), labels, t, s.vocab, s.vocab_start, row_max.view(), sum_exp, target);
  });
  k_.tp_all_reduce(sums.view());
  a.dlogits = k_.activation(t * s.vocab);
  k_.recorder().compute("cross_entropy", EventCategory::kElementwise, 0.0, 2.0 * logit_bytes, [&] {
    dev.cross_entropy_loss(row_max.view(), sum_exp, target, t, loss.view());
    dev.sum(loss.view(), tmp);
    dev.axpy(1.0f, tmp, loss_sum);
    dev.cross_entropy_backward(logits.view(), labels, row_max.view(), sum_exp, t, s.vocab, s.vocab_start, grad_scale,
                               a.dlogits.view());
  });
}

Tensor EmbeddingHead::head_backward(const TensorView& norm_weight, const TensorView& output_weight,
                                    HeadActivations& a, const TensorView& d_norm_weight,
                                    const TensorView& d_norm_bias, const TensorView& d_output_weight,
                                    DeferredWgrad* deferred) {
  const Shapes& s = k_.shapes();
  const i64 rows = s.local_tokens;
  Tensor d_norm_full = k_.activation(s.tokens * s.h);
  k_.column_dgrad("logits dgrad", a.dlogits.view(), output_weight, s.tokens, s.h, s.vocab, d_norm_full.view());
  if (deferred != nullptr) {
    *deferred = {"logits wgrad", true, std::move(a.dlogits), std::move(a.norm), s.tokens, s.h, s.vocab};
  } else {
    Tensor gathered;
    const TensorView in = k_.gather_column_input(a.norm.view(), gathered);
    k_.column_wgrad("logits wgrad", a.dlogits.view(), in, s.tokens, s.h, s.vocab, d_output_weight, {});
  }
  a.dlogits = Tensor();
  Tensor d_norm = k_.reduce_column_input_grad(std::move(d_norm_full));
  Tensor dx = k_.activation(rows * s.h);
  k_.norm_backward("final_norm bwd", d_norm.view(), a.x.view(), norm_weight, a.norm_mean.view(), a.norm_rstd.view(),
                   rows, dx.view(), d_norm_weight, d_norm_bias);
  a = HeadActivations{};
  return dx;
}

}  // namespace strata::rt
