// The building blocks of a tensor-parallel transformer on one rank: the shapes
// a plan gives a rank, linear layers in Megatron-LM's column- and row-parallel
// forms, normalizations, and the tensor-parallel collectives between them, each
// call timed into the Recorder under the simulator's op names.
//
// Linear layers (row-major, tokens in rows):
//   column-parallel W [out, in]:  y = x W^T,  dx = dy W,  dW += dy^T x
//   row-parallel    W [in, out]:  y = x W,    dx = dy W^T, dW += x^T dy
// Weight gradients are fp32 and accumulated (beta = 1), as into Megatron's main_grad.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/comm/communicator.h"
#include "runtime/executor/recorder.h"
#include "plan/model_spec.h"
#include "plan/plan_spec.h"

namespace strata::rt {

// Sizes of one micro-batch on one rank.
struct Shapes {
  std::int64_t b = 1;       // micro-batch size
  std::int64_t s = 1;       // this rank's tokens of a sequence: seq / cp
  std::int64_t seq = 1;     // the whole sequence (the position table's rows)
  std::int64_t tokens = 1;  // b * s, rows of a replicated activation
  std::int64_t local_tokens = 1;  // rows of the residual stream here (tokens / tp with sequence parallelism)
  std::int64_t h = 1;
  std::int64_t d = 1;       // head size
  std::int64_t heads = 1;   // attention heads on this rank
  std::int64_t groups = 1;  // query groups on this rank
  std::int64_t heads_per_group = 1;
  std::int64_t q_width = 1;    // heads * d
  std::int64_t kv_width = 1;   // groups * d
  std::int64_t qkv_width = 1;  // q_width + 2 * kv_width
  std::int64_t ffn = 1;        // ffn_hidden_size / tp
  std::int64_t fc1_width = 1;  // 2 * ffn when gated
  std::int64_t shared_ffn = 0;  // an MoE layer's shared experts: moe_shared_expert_intermediate_size / tp (0: none)
  std::int64_t vocab = 1;      // vocab_size / tp
  std::int64_t vocab_start = 0;
  int tp = 1;
  int cp = 1;  // context-parallel ranks (context_parallel.h)
  bool sequence_parallel = false;
  bool swiglu = false;
  bool layernorm = true;
  bool bias = true;
  DType dtype = DType::kFp32;  // storage dtype of activations and weights
};

Shapes make_shapes(const ModelSpec& model, const PlanSpec& plan, int tp_rank, DType storage_dtype);

// Norm epsilon: Megatron-LM's --norm-epsilon default.
inline constexpr float kNormEpsilon = 1e-5f;

// A linear layer's weight-gradient GEMM that a zero-bubble schedule's B leaves
// to its W (Qi et al. 2024, section 2.1), with what the GEMM needs kept until
// then: the output gradient whole, and the input as the backward had it. A
// column-parallel layer's input is kept as the residual stream's rows on this
// rank, which W gathers again with sequence parallelism (sail-sg's zero-bubble
// Megatron-LM, WeightGradStore.put), as the memory model counts it
// (plan/memory_model.h: weight_grad_input_bytes).
struct DeferredWgrad {
  const char* name = "";
  bool column = true;  // column-parallel: dW += dy^T x; row-parallel: dW += x^T dy
  Tensor dy;           // [rows, out]
  Tensor x;            // column: the stream [local_tokens, in]; row: [rows, in]
  std::int64_t rows = 0, in = 0, out = 0;
};

class Kernels {
 public:
  Kernels(Device& device, Communicator& tp, Recorder& recorder, const Shapes& shapes);

  Device& device() { return device_; }
  Recorder& recorder() { return recorder_; }
  const Shapes& shapes() const { return shapes_; }
  // An activation tensor of n elements in the training dtype.
  Tensor activation(std::int64_t n) { return device_.allocate_tensor(n, shapes_.dtype); }
  Tensor fp32(std::int64_t n) { return device_.allocate_tensor(n, DType::kFp32); }

  // bias (may be empty): added to y in the same timed event (a GEMM epilogue).
  void column_forward(const char* name, const TensorView& x, const TensorView& w, const TensorView& bias,
                      std::int64_t rows, std::int64_t in, std::int64_t out, const TensorView& y);
  void column_dgrad(const char* name, const TensorView& dy, const TensorView& w, std::int64_t rows,
                    std::int64_t in, std::int64_t out, const TensorView& dx);
  // dbias (may be empty) += column sums of dy, in the same timed event.
  void column_wgrad(const char* name, const TensorView& dy, const TensorView& x, std::int64_t rows,
                    std::int64_t in, std::int64_t out, const TensorView& dw, const TensorView& dbias);
  void row_forward(const char* name, const TensorView& x, const TensorView& w, std::int64_t rows,
                   std::int64_t in, std::int64_t out, const TensorView& y);
  void row_dgrad(const char* name, const TensorView& dy, const TensorView& w, std::int64_t rows,
                 std::int64_t in, std::int64_t out, const TensorView& dx);
  void row_wgrad(const char* name, const TensorView& dy, const TensorView& x, std::int64_t rows,
                 std::int64_t in, std::int64_t out, const TensorView& dw);
  // A deferred weight gradient (W): dw (and a column layer's dbias, may be empty)
  // accumulated as column_wgrad / row_wgrad would have in the backward.
  void deferred_wgrad(const DeferredWgrad& w, const TensorView& dw, const TensorView& dbias);

  // Norm over rows of width h: layernorm (beta may be empty) or rmsnorm by the model.
  // mean is unused (may be empty) for rmsnorm.
  void norm_forward(const char* name, const TensorView& x, const TensorView& gamma, const TensorView& beta,
                    std::int64_t rows, const TensorView& y, const TensorView& mean, const TensorView& rstd);
  // dx overwritten; dgamma, dbeta accumulated.
  void norm_backward(const char* name, const TensorView& dy, const TensorView& x, const TensorView& gamma,
                     const TensorView& mean, const TensorView& rstd, std::int64_t rows, const TensorView& dx,
                     const TensorView& dgamma, const TensorView& dbeta);

  // Tensor-parallel collectives (blocking), recorded on the tp-comm lane. With
  // tp == 1 all_reduce does nothing; the others need tp > 1.
  void tp_all_reduce(const TensorView& x, ReduceOp op = ReduceOp::kSum);
  void tp_all_gather(const TensorView& local, const TensorView& full);
  void tp_reduce_scatter(const TensorView& full, const TensorView& local);
  // After a row-parallel layer: sum the partial outputs [tokens, h] over tp into
  // the residual stream [local_tokens, h] (all-reduce, or reduce-scatter with
  // sequence parallelism). Returns the stream tensor (partial itself when it is).
  Tensor reduce_row_output(Tensor partial);
  // Before a column-parallel layer: the whole [tokens, h] input from the stream
  // (all-gather with sequence parallelism; else the stream itself, not copied).
  // The returned view stays valid while `stream` and `gathered` live.
  TensorView gather_column_input(const TensorView& stream, Tensor& gathered);
  // Backward of gather_column_input: the gradient [tokens, h] is summed over tp
  // into the stream's shape (all-reduce, or reduce-scatter with sequence parallelism).
  Tensor reduce_column_input_grad(Tensor grad);
  // Backward of reduce_row_output: the stream's gradient as the whole [tokens, h]
  // (all-gather with sequence parallelism; else the gradient itself).
  TensorView gather_row_output_grad(const TensorView& grad, Tensor& gathered);

 private:
  void gemm(const char* name, EventCategory category, const GemmArgs& args);
  void tp_event(const char* name, double bytes, TimeNs start);

  Device& device_;
  Communicator& tp_;
  Recorder& recorder_;
  Shapes shapes_;
};

}  // namespace strata::rt
