// One device that runs the kernels of a transformer training step: the seam
// between the executor and calibration (above) and the cpu / cuda backends (below).
//
// Conventions every backend keeps:
//   - Matrices are row-major. A [rows, cols] tensor stores element (r, c) at
//     r * ld + c, with ld = cols unless a leading dimension is given.
//   - Work is ordered: every call runs after the previous call on the same
//     device (cpu: each call completes before it returns; cuda: one stream).
//     Host memory written by copy_to_host is valid after synchronize().
//   - Element types: a tensor's dtype is its *storage* dtype. Ask
//     storage_dtype(requested) (or allocate_tensor, which does) before
//     allocating: the cpu backend stores and computes bf16/fp16/tf32 requests
//     in fp32 and says so in DeviceInfo; cuda stores bf16, fp16 and fp32 as is.
//   - Within one kernel, activations and weights share one dtype; statistics
//     (mean, rstd, row max, sum of exponentials, loss) are fp32; parameter
//     gradients (dgamma, dbeta, dbias, dtable) are fp32 and ACCUMULATED (+=),
//     as Megatron accumulates into fp32 main_grad; data gradients (dx) are
//     overwritten. The Adam update is fp32 throughout.
//   - Every floating-point result is deterministic: the same inputs give the
//     same bits on every run (no atomics, fixed reduction orders).
//   - A kernel given inconsistent sizes or dtypes throws InternalError (that is
//     a bug in the caller, not bad user input); nothing is written then.
//
// Thread safety: a Device is used by one host thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "core/dtype.h"
#include "core/units.h"
#include "runtime/device/backend.h"

namespace strata::rt {

class Device;

enum class MemoryKind {
  kDevice,      // device memory (cpu: ordinary host memory, 64-byte aligned)
  kPinnedHost,  // page-locked host memory for fast, asynchronous copies (cpu: same as kDevice)
};

// Owning, move-only handle to memory from one Device. The Device must outlive
// its buffers. An empty (default or moved-from) buffer owns nothing.
class Buffer {
 public:
  Buffer() = default;
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  MemoryKind kind() const { return kind_; }
  bool empty() const { return data_ == nullptr; }

 private:
  friend class Device;
  Buffer(Device* owner, void* data, std::size_t bytes, MemoryKind kind)
      : owner_(owner), data_(data), bytes_(bytes), kind_(kind) {}
  void reset();

  Device* owner_ = nullptr;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  MemoryKind kind_ = MemoryKind::kDevice;
};

// Non-owning view of numel elements of one dtype in device memory.
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kFp32;
  std::int64_t numel = 0;

  std::int64_t bytes() const { return numel * dtype_bytes(dtype); }
  // Elements [offset, offset + count); throws InternalError when out of range.
  TensorView slice(std::int64_t offset, std::int64_t count) const;
};

// Non-owning view of count int32 indices (token ids, labels) in device memory.
struct IndexView {
  std::int32_t* data = nullptr;
  std::int64_t count = 0;
};

// Owning tensor: a buffer and what it holds. Move-only.
class Tensor {
 public:
  Tensor() = default;
  Tensor(Buffer buffer, DType dtype, std::int64_t numel);
  TensorView view() const { return {buffer_.data(), dtype_, numel_}; }
  DType dtype() const { return dtype_; }
  std::int64_t numel() const { return numel_; }
  const Buffer& buffer() const { return buffer_; }

 private:
  Buffer buffer_;
  DType dtype_ = DType::kFp32;
  std::int64_t numel_ = 0;
};

// An index (int32) tensor. Move-only.
class IndexTensor {
 public:
  IndexTensor() = default;
  IndexTensor(Buffer buffer, std::int64_t count);
  IndexView view() const { return {static_cast<std::int32_t*>(buffer_.data()), count_}; }
  std::int64_t count() const { return count_; }

 private:
  Buffer buffer_;
  std::int64_t count_ = 0;
};

// What a device is and how it computes; written into calibrated profiles.
struct DeviceInfo {
  Backend backend = Backend::kCpu;
  int index = 0;                // local device index (cuda ordinal; 0 on cpu)
  std::string name;             // "NVIDIA H100 80GB HBM3", or the host CPU's model name
  int compute_units = 1;        // SMs (cuda) or the threads this device uses (cpu)
  int host_cores = 1;           // cores of the host this process may use
  std::int64_t memory_bytes = 0;  // device memory (cpu: physical host memory)
  // Last-level cache a kernel's operands may sit in (cuda: L2; cpu: the largest
  // data cache the OS reports, which a VM may report for the whole socket). 0: unknown.
  std::int64_t cache_bytes = 0;
  std::string isa;              // cpu: Eigen's SIMD instruction sets ("AVX2, FMA, SSE..."); cuda: "sm_90"
  std::map<std::string, std::string> versions;  // "eigen", "cuda_runtime", "cuda_driver", "cublas", "nccl", "mpi"
  // For each requested dtype, the dtype it is stored and multiplied in
  // (cpu: every request -> fp32; cuda: bf16->bf16 with fp32 accumulate, ...).
  std::map<DType, DType> storage_dtype;
  std::string notes;            // human-readable caveats ("bf16/fp16 requests compute in fp32 on cpu")
};

// A point in the device's ordered work, for timing.
class Event {
 public:
  virtual ~Event() = default;
};

enum class Transpose { kNo, kYes };

// C[i] = alpha * op(A[i]) * op(B[i]) + beta * C[i] for i in [0, batch), row-major.
// op(A) is m x k, op(B) is k x n, C is m x n. A[i] starts at a.data + i * stride_a
// elements (likewise B, C); ld* are row strides in elements (lda >= cols of A as
// stored). A and B share one dtype; C has the same dtype or fp32 (fp32
// accumulation into fp32 gradients). Accumulation is always fp32; tf32 = true
// lets fp32 inputs use TF32 tensor cores (cuda; ignored on cpu). When beta == 0,
// C is not read (it may hold garbage).
struct GemmArgs {
  Transpose trans_a = Transpose::kNo;
  Transpose trans_b = Transpose::kNo;
  std::int64_t m = 0, n = 0, k = 0;
  float alpha = 1.0f;
  float beta = 0.0f;
  TensorView a;
  std::int64_t lda = 0;
  std::int64_t stride_a = 0;
  TensorView b;
  std::int64_t ldb = 0;
  std::int64_t stride_b = 0;
  TensorView c;
  std::int64_t ldc = 0;
  std::int64_t stride_c = 0;
  std::int64_t batch = 1;
  bool tf32 = false;
};

// The GemmArgs of C[i] = op(A[i]) op(B[i]) (+ beta C[i]) over `batch` matrices
// strided by sa, sb, sc elements (0 and batch 1: one GEMM).
inline GemmArgs strided_batched_gemm(Transpose ta, Transpose tb, std::int64_t m, std::int64_t n, std::int64_t k,
                                     const TensorView& a, std::int64_t lda, std::int64_t sa, const TensorView& b,
                                     std::int64_t ldb, std::int64_t sb, const TensorView& c, std::int64_t ldc,
                                     std::int64_t sc, std::int64_t batch, float beta = 0.0f) {
  GemmArgs g;
  g.trans_a = ta;
  g.trans_b = tb;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = a;
  g.lda = lda;
  g.stride_a = sa;
  g.b = b;
  g.ldb = ldb;
  g.stride_b = sb;
  g.c = c;
  g.ldc = ldc;
  g.stride_c = sc;
  g.batch = batch;
  g.beta = beta;
  return g;
}

// AdamW (decoupled weight decay, Loshchilov & Hutter 2019; torch.optim.AdamW and
// apex FusedAdam with adam_w_mode, which Megatron-LM uses), with bias correction.
struct AdamParams {
  float lr = 1e-4f;
  float beta1 = 0.9f;     // Megatron's --adam-beta1 default
  float beta2 = 0.999f;   // Megatron's --adam-beta2 default
  float eps = 1e-8f;      // Megatron's --adam-eps default
  float weight_decay = 0.0f;
};

struct DeviceOptions {
  // cpu: compute threads for this process; 0 = cores / local ranks (so ranks x
  // threads never exceeds the cores). Ignored on cuda.
  int cpu_threads = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  virtual const DeviceInfo& info() const = 0;
  Backend backend() const { return info().backend; }
  // The dtype a tensor requested as `requested` is stored in on this device.
  DType storage_dtype(DType requested) const;

  // ---- Memory ---------------------------------------------------------------
  // bytes of memory of the given kind (0 gives an empty buffer). Throws
  // InternalError when the device is out of memory, naming the size asked.
  Buffer allocate(std::size_t bytes, MemoryKind kind = MemoryKind::kDevice);
  // numel elements stored in storage_dtype(requested).
  Tensor allocate_tensor(std::int64_t numel, DType requested);
  IndexTensor allocate_indices(std::int64_t count);
  // Device memory currently allocated by this Device, and the most since
  // construction or the last reset_peak_memory(). Pinned host memory not counted.
  std::int64_t memory_in_use_bytes() const { return in_use_bytes_; }
  std::int64_t peak_memory_bytes() const { return peak_bytes_; }
  void reset_peak_memory() { peak_bytes_ = in_use_bytes_; }

  // ---- Copies (bytes, ordered with the device's work) -----------------------
  // host -> device; `host` may be pageable or pinned (pinned: asynchronous on cuda).
  virtual void copy_to_device(const void* host, void* device_dst, std::size_t bytes) = 0;
  // device -> host; the host bytes are valid after synchronize().
  virtual void copy_to_host(const void* device_src, void* host, std::size_t bytes) = 0;
  // device -> device.
  virtual void copy_on_device(const void* src, void* dst, std::size_t bytes) = 0;

  // ---- GEMM -----------------------------------------------------------------
  virtual void gemm(const GemmArgs& args) = 0;

  // ---- Normalization over the last dimension of x [rows, cols] --------------
  // LayerNorm (Ba et al. 2016): y = (x - mean) * rstd * gamma + beta,
  // rstd = 1 / sqrt(var + eps), var the biased variance. beta may be empty (no
  // bias). Writes mean and rstd (fp32, [rows]) for the backward pass.
  virtual void layernorm_forward(const TensorView& x, const TensorView& gamma,
                                 const TensorView& beta, std::int64_t rows, std::int64_t cols,
                                 float eps, const TensorView& y, const TensorView& mean,
                                 const TensorView& rstd) = 0;
  // dx = gradient wrt x (overwritten); dgamma += sum_rows(dy * xhat);
  // dbeta += sum_rows(dy) (dbeta may be empty).
  virtual void layernorm_backward(const TensorView& dy, const TensorView& x,
                                  const TensorView& gamma, const TensorView& mean,
                                  const TensorView& rstd, std::int64_t rows, std::int64_t cols,
                                  const TensorView& dx, const TensorView& dgamma,
                                  const TensorView& dbeta) = 0;
  // RMSNorm (Zhang & Sennrich 2019): y = x * rstd * gamma, rstd = 1/sqrt(mean(x^2) + eps).
  virtual void rmsnorm_forward(const TensorView& x, const TensorView& gamma, std::int64_t rows,
                               std::int64_t cols, float eps, const TensorView& y,
                               const TensorView& rstd) = 0;
  // dx overwritten; dgamma += sum_rows(dy * x * rstd).
  virtual void rmsnorm_backward(const TensorView& dy, const TensorView& x,
                                const TensorView& gamma, const TensorView& rstd,
                                std::int64_t rows, std::int64_t cols, const TensorView& dx,
                                const TensorView& dgamma) = 0;

  // ---- Activations -----------------------------------------------------------
  // GeLU, tanh approximation (Hendrycks & Gimpel 2016, eq. in sec. 2; Megatron's
  // fused bias_gelu): y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). y may alias x.
  virtual void gelu_forward(const TensorView& x, const TensorView& y) = 0;
  // dx = dy * gelu'(x). dx may alias dy.
  virtual void gelu_backward(const TensorView& dy, const TensorView& x, const TensorView& dx) = 0;
  // SwiGLU (Shazeer 2020; Megatron's swiglu): x [rows, 2f] = [a | b] per row,
  // y [rows, f] = silu(a) * b, silu(a) = a * sigmoid(a).
  virtual void swiglu_forward(const TensorView& x, std::int64_t rows, std::int64_t f,
                              const TensorView& y) = 0;
  // dx [rows, 2f] = [dy * b * silu'(a) | dy * silu(a)].
  virtual void swiglu_backward(const TensorView& dy, const TensorView& x, std::int64_t rows,
                               std::int64_t f, const TensorView& dx) = 0;

  // ---- Attention scores --------------------------------------------------------
  // Row softmax of scale * x over x [rows, cols], where rows are stacked
  // [rows_per_matrix, cols] score matrices (one per batch x head). With causal,
  // element (i, j) of each matrix is masked (y = 0) when j > i + (cols -
  // rows_per_matrix), i.e. a query sees keys up to its own position. y may alias x.
  virtual void softmax_forward(const TensorView& x, std::int64_t rows, std::int64_t cols,
                               std::int64_t rows_per_matrix, float scale, bool causal,
                               const TensorView& y) = 0;
  // dx = scale * y * (dy - sum_row(dy * y)), from the forward output y. dx may alias dy.
  virtual void softmax_backward(const TensorView& y, const TensorView& dy, std::int64_t rows,
                                std::int64_t cols, float scale, const TensorView& dx) = 0;

  // ---- Elementwise and layout --------------------------------------------------
  // out = a + b (residual add); out may alias a or b.
  virtual void add(const TensorView& a, const TensorView& b, const TensorView& out) = 0;
  // x [rows, cols] += bias [cols] per row, in place (linear-layer bias).
  virtual void add_bias(const TensorView& x, const TensorView& bias, std::int64_t rows,
                        std::int64_t cols) = 0;
  // dbias (fp32, [cols]) += sum over rows of dy [rows, cols].
  virtual void bias_backward(const TensorView& dy, std::int64_t rows, std::int64_t cols,
                             const TensorView& dbias) = 0;
  // x *= alpha, in place.
  virtual void scale(const TensorView& x, float alpha) = 0;
  // y += alpha * x; x and y may differ in dtype (fp32 y accumulating bf16 x).
  virtual void axpy(float alpha, const TensorView& x, const TensorView& y) = 0;
  // Every element = value.
  virtual void fill(const TensorView& x, float value) = 0;
  // dst = src converted to dst.dtype (round to nearest even); same numel.
  virtual void convert(const TensorView& src, const TensorView& dst) = 0;
  // Deterministic uniform values in [lo, hi): element k gets
  // random_uniform(seed, first_index + k, lo, hi) (runtime/device/random.h), the same on
  // every backend and thread count, so a shard can be filled to match the whole.
  virtual void fill_random(const TensorView& x, std::uint64_t seed, std::uint64_t first_index,
                           float lo, float hi) = 0;
  // Strided 2-D copy of a rows x cols block: dst[r*dst_ld + c] = src[r*src_ld + c]
  // (same dtype). Splits and concatenates column blocks (QKV, SwiGLU halves).
  virtual void copy_2d(const TensorView& src, std::int64_t src_ld, const TensorView& dst,
                       std::int64_t dst_ld, std::int64_t rows, std::int64_t cols) = 0;
  // y[i0, i2, i1, i3] = x[i0, i1, i2, i3] for x of shape [d0, d1, d2, d3]
  // ([b, s, heads, head_dim] <-> [b, heads, s, head_dim]); its own backward with d1, d2 swapped.
  virtual void permute_0213(const TensorView& x, std::int64_t d0, std::int64_t d1,
                            std::int64_t d2, std::int64_t d3, const TensorView& y) = 0;

  // ---- Token routing (mixture-of-experts layers) -----------------------------------
  // Weighted row gather: dst row r [cols] = sum over j < k of weight[r*k + j] *
  // src row index[r*k + j], for r < index.count / k; entries with index < 0 add
  // nothing (a row with none is zeros). weight is fp32 [index.count] or empty (all
  // 1). Summed in fp32 in j order, written in dst's dtype; src and dst share a
  // dtype and must not overlap. k = 1 permutes rows (an MoE layer's dispatch);
  // k = top-k sums each token's experts' outputs by its gates (the combine).
  virtual void gather_sum_rows(const TensorView& src, const IndexView& index, const TensorView& weight,
                               std::int64_t k, std::int64_t cols, const TensorView& dst) = 0;
  // out (fp32) [index.count] = dot(a row i / k, b row index[i]) over cols, in
  // fp32 (0 where index[i] < 0): the gradient of the combine's gates, with a
  // [index.count / k, cols] the combined output's gradient and b the experts' outputs.
  virtual void gather_row_dots(const TensorView& a, const TensorView& b, const IndexView& index, std::int64_t k,
                               std::int64_t cols, const TensorView& out) = 0;

  // ---- Embedding (Megatron's VocabParallelEmbedding) ------------------------------
  // out [tokens, h] row t = table[ids[t] - vocab_start] when that row is in
  // this shard's table [vocab_rows, h], else zeros (summed over TP ranks later).
  virtual void embedding_forward(const IndexView& ids, const TensorView& table,
                                 std::int64_t vocab_rows, std::int64_t h,
                                 std::int64_t vocab_start, const TensorView& out) = 0;
  // dtable (fp32, [vocab_rows, h]) row ids[t] - vocab_start += dout row t, for
  // the ids in this shard, accumulated in token order.
  virtual void embedding_backward(const IndexView& ids, const TensorView& dout,
                                  std::int64_t vocab_rows, std::int64_t h,
                                  std::int64_t vocab_start, const TensorView& dtable) = 0;

  // ---- Cross-entropy over logits [tokens, vocab_cols], vocab-parallel ------------
  // Megatron's vocab_parallel_cross_entropy in three steps so a TP group can
  // all-reduce between them (max, then sums); one rank runs them back to back
  // (see cross_entropy_forward in runtime/device/tensor_io.h). labels are global
  // ids; this shard holds columns [vocab_start, vocab_start + vocab_cols).
  // row_max (fp32, [tokens]) = max over this shard's columns.
  virtual void cross_entropy_row_max(const TensorView& logits, std::int64_t tokens,
                                     std::int64_t vocab_cols, const TensorView& row_max) = 0;
  // sum_exp (fp32) = sum_j exp(logit_j - row_max); target_logit (fp32) = the
  // label's logit when in this shard, else 0.
  virtual void cross_entropy_partials(const TensorView& logits, const IndexView& labels,
                                      std::int64_t tokens, std::int64_t vocab_cols,
                                      std::int64_t vocab_start, const TensorView& row_max,
                                      const TensorView& sum_exp,
                                      const TensorView& target_logit) = 0;
  // loss (fp32, [tokens]) = log(sum_exp) + row_max - target_logit.
  virtual void cross_entropy_loss(const TensorView& row_max, const TensorView& sum_exp,
                                  const TensorView& target_logit, std::int64_t tokens,
                                  const TensorView& loss) = 0;
  // dlogits = grad_scale * (softmax(logits) - onehot(label)) using the global
  // row_max and sum_exp; grad_scale is d(total loss)/d(loss of one token)
  // (1 / tokens for a mean).
  virtual void cross_entropy_backward(const TensorView& logits, const IndexView& labels,
                                      const TensorView& row_max, const TensorView& sum_exp,
                                      std::int64_t tokens, std::int64_t vocab_cols,
                                      std::int64_t vocab_start, float grad_scale,
                                      const TensorView& dlogits) = 0;

  // ---- Reductions (fp32 scalar out, summed in double in a fixed order) -----------
  virtual void sum(const TensorView& x, const TensorView& out) = 0;
  virtual void sum_squares(const TensorView& x, const TensorView& out) = 0;

  // ---- Optimizer -----------------------------------------------------------------
  // One AdamW step on fp32 param, grad, exp_avg, exp_avg_sq (all numel equal);
  // step counts from 1 (bias correction 1 - beta^step).
  virtual void adam_step(const TensorView& param, const TensorView& grad,
                         const TensorView& exp_avg, const TensorView& exp_avg_sq,
                         const AdamParams& params, std::int64_t step) = 0;

  // ---- Timing and ordering ---------------------------------------------------------
  virtual std::unique_ptr<Event> create_event() = 0;
  // Marks the point after all work issued so far (cpu: now, steady_clock).
  virtual void record(Event& event) = 0;
  // Time from start to end (both recorded); waits for end to complete.
  virtual Duration elapsed(const Event& start, const Event& end) = 0;
  // Blocks until all issued work has completed.
  virtual void synchronize() = 0;

 protected:
  Device() = default;
  // Backend hooks for allocate(); raw_allocate throws InternalError when out of memory.
  virtual void* raw_allocate(std::size_t bytes, MemoryKind kind) = 0;
  virtual void raw_free(void* data, std::size_t bytes, MemoryKind kind) noexcept = 0;

 private:
  friend class Buffer;
  void release(Buffer& buffer) noexcept;

  std::int64_t in_use_bytes_ = 0;
  std::int64_t peak_bytes_ = 0;
};

// Creates a device of the given backend. local_index: cuda ordinal (0 on cpu).
// Throws InputError (no file, no path) when the backend is not in this build,
// when the machine has no GPU for cuda, or when local_index is not a device.
std::unique_ptr<Device> make_device(Backend backend, int local_index,
                                    const DeviceOptions& options = {});

}  // namespace strata::rt
