// The first and last blocks of the model on one tensor-parallel rank:
// Megatron-LM's VocabParallelEmbedding (each rank looks up its vocabulary rows,
// the partial results are summed over tp) plus learned positions, and the
// output head: final norm, column-parallel logits over this rank's vocabulary
// and the vocabulary-parallel cross-entropy (row max, then sums of exponentials
// and target logits all-reduced over tp). The loss gradient is computed in the
// forward, as Megatron's cross-entropy keeps its softmax for the backward.
#pragma once

#include "runtime/executor/kernels.h"

namespace strata::rt {

struct HeadActivations {
  Tensor x;                       // final norm input [local_tokens, h]
  Tensor norm, norm_mean, norm_rstd;
  Tensor dlogits;                 // d(loss)/d(logits) [tokens, vocab / tp]
};

class EmbeddingHead {
 public:
  explicit EmbeddingHead(Kernels& kernels);

  // Word embeddings [vocab/tp, h] of ids [tokens] (+ learned positions
  // [s, h] at this rank's tokens when positions is not empty) -> the residual
  // stream [local_tokens, h].
  Tensor embedding_forward(const TensorView& words, const TensorView& positions, const IndexView& ids,
                           const IndexView& position_ids);
  // Accumulates the gradients of the word (and position) embeddings from dx.
  void embedding_backward(const TensorView& dx, const IndexView& ids, const IndexView& position_ids,
                          const TensorView& d_words, const TensorView& d_positions);

  // Final norm, logits, cross-entropy of x against labels [tokens]. Adds the
  // sum of this micro-batch's token losses to loss_sum (fp32 scalar; tmp is one
  // fp32 scratch element) and keeps what the backward needs in a. grad_scale:
  // d(step loss) / d(one token's loss), 1 / (tokens in the global batch).
  void head_forward(const TensorView& norm_weight, const TensorView& norm_bias, const TensorView& output_weight,
                    HeadActivations& a, const IndexView& labels, float grad_scale, const TensorView& loss_sum,
                    const TensorView& tmp);
  // -> gradient of the head's input [local_tokens, h]; accumulates the
  // norm's and the output layer's gradients; frees a. With `deferred` (a
  // zero-bubble schedule's B) the output layer's weight gradient is left there
  // for W (Kernels::deferred_wgrad into the output weight's gradient).
  Tensor head_backward(const TensorView& norm_weight, const TensorView& output_weight, HeadActivations& a,
                       const TensorView& d_norm_weight, const TensorView& d_norm_bias,
                       const TensorView& d_output_weight, DeferredWgrad* deferred = nullptr);

 private:
  Kernels& k_;
};

}  // namespace strata::rt
