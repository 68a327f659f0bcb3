// The cpu Device class, shared by the files that implement its kernels
// (cpu_device.cc: memory, copies, timing; cpu_gemm.cc; cpu_norm.cc;
// cpu_activation.cc; cpu_elementwise.cc; cpu_embedding_loss.cc; cpu_routing.cc). Private to runtime/cpu.
#pragma once

#include <algorithm>
#include <cstdint>

#include "runtime/cpu/host_block_cache.h"
#include "runtime/device/device.h"

namespace strata::rt {

// 64 bytes: a cache line, and the widest vector (AVX-512) Eigen loads.
inline constexpr std::size_t kCpuAlignmentBytes = 64;

class CpuDevice final : public Device {
 public:
  explicit CpuDevice(const DeviceOptions& options);

  const DeviceInfo& info() const override { return info_; }
  int threads() const { return threads_; }

  void copy_to_device(const void* host, void* device_dst, std::size_t bytes) override;
  void copy_to_host(const void* device_src, void* host, std::size_t bytes) override;
  void copy_on_device(const void* src, void* dst, std::size_t bytes) override;

  void gemm(const GemmArgs& args) override;

  void layernorm_forward(const TensorView& x, const TensorView& gamma, const TensorView& beta,
                         std::int64_t rows, std::int64_t cols, float eps, const TensorView& y,
                         const TensorView& mean, const TensorView& rstd) override;
  void layernorm_backward(const TensorView& dy, const TensorView& x, const TensorView& gamma,
                          const TensorView& mean, const TensorView& rstd, std::int64_t rows,
                          std::int64_t cols, const TensorView& dx, const TensorView& dgamma,
                          const TensorView& dbeta) override;
  void rmsnorm_forward(const TensorView& x, const TensorView& gamma, std::int64_t rows,
                       std::int64_t cols, float eps, const TensorView& y,
                       const TensorView& rstd) override;
  void rmsnorm_backward(const TensorView& dy, const TensorView& x, const TensorView& gamma,
                        const TensorView& rstd, std::int64_t rows, std::int64_t cols,
                        const TensorView& dx, const TensorView& dgamma) override;

  void gelu_forward(const TensorView& x, const TensorView& y) override;
  void gelu_backward(const TensorView& dy, const TensorView& x, const TensorView& dx) override;
  void swiglu_forward(const TensorView& x, std::int64_t rows, std::int64_t f,
                      const TensorView& y) override;
  void swiglu_backward(const TensorView& dy, const TensorView& x, std::int64_t rows,
                       std::int64_t f, const TensorView& dx) override;
  void softmax_forward(const TensorView& x, std::int64_t rows, std::int64_t cols,
                       std::int64_t rows_per_matrix, float scale, bool causal,
                       const TensorView& y) override;
  void softmax_backward(const TensorView& y, const TensorView& dy, std::int64_t rows,
                        std::int64_t cols, float scale, const TensorView& dx) override;

  void add(const TensorView& a, const TensorView& b, const TensorView& out) override;
  void add_bias(const TensorView& x, const TensorView& bias, std::int64_t rows,
                std::int64_t cols) override;
  void bias_backward(const TensorView& dy, std::int64_t rows, std::int64_t cols,
                     const TensorView& dbias) override;
  void scale(const TensorView& x, float alpha) override;
  void axpy(float alpha, const TensorView& x, const TensorView& y) override;
  void fill(const TensorView& x, float value) override;
  void convert(const TensorView& src, const TensorView& dst) override;
  void fill_random(const TensorView& x, std::uint64_t seed, std::uint64_t first_index, float lo,
                   float hi) override;
  void copy_2d(const TensorView& src, std::int64_t src_ld, const TensorView& dst,
               std::int64_t dst_ld, std::int64_t rows, std::int64_t cols) override;
  void permute_0213(const TensorView& x, std::int64_t d0, std::int64_t d1, std::int64_t d2,
                    std::int64_t d3, const TensorView& y) override;
  void gather_sum_rows(const TensorView& src, const IndexView& index, const TensorView& weight, std::int64_t k,
                       std::int64_t cols, const TensorView& dst) override;
  void gather_row_dots(const TensorView& a, const TensorView& b, const IndexView& index, std::int64_t k,
                       std::int64_t cols, const TensorView& out) override;

  void embedding_forward(const IndexView& ids, const TensorView& table, std::int64_t vocab_rows,
                         std::int64_t h, std::int64_t vocab_start, const TensorView& out) override;
  void embedding_backward(const IndexView& ids, const TensorView& dout, std::int64_t vocab_rows,
                          std::int64_t h, std::int64_t vocab_start,
                          const TensorView& dtable) override;
  void cross_entropy_row_max(const TensorView& logits, std::int64_t tokens,
                             std::int64_t vocab_cols, const TensorView& row_max) override;
  void cross_entropy_partials(const TensorView& logits, const IndexView& labels,
                              std::int64_t tokens, std::int64_t vocab_cols,
                              std::int64_t vocab_start, const TensorView& row_max,
                              const TensorView& sum_exp, const TensorView& target_logit) override;
  void cross_entropy_loss(const TensorView& row_max, const TensorView& sum_exp,
                          const TensorView& target_logit, std::int64_t tokens,
                          const TensorView& loss) override;
  void cross_entropy_backward(const TensorView& logits, const IndexView& labels,
                              const TensorView& row_max, const TensorView& sum_exp,
                              std::int64_t tokens, std::int64_t vocab_cols,
                              std::int64_t vocab_start, float grad_scale,
                              const TensorView& dlogits) override;

  void sum(const TensorView& x, const TensorView& out) override;
  void sum_squares(const TensorView& x, const TensorView& out) override;
  void adam_step(const TensorView& param, const TensorView& grad, const TensorView& exp_avg,
                 const TensorView& exp_avg_sq, const AdamParams& params,
                 std::int64_t step) override;

  std::unique_ptr<Event> create_event() override;
  void record(Event& event) override;
  Duration elapsed(const Event& start, const Event& end) override;
  void synchronize() override {}

 protected:
  void* raw_allocate(std::size_t bytes, MemoryKind kind) override;
  void raw_free(void* data, std::size_t bytes, MemoryKind kind) noexcept override;

 private:
  DeviceInfo info_;
  int threads_ = 1;
  HostBlockCache blocks_{kCpuAlignmentBytes};
};

// An fp32 pointer to v after checking it is fp32 with `numel` elements
// (every cpu tensor is stored in fp32).
float* f32(const char* kernel, const char* name, const TensorView& v, std::int64_t numel);

// Runs body(r) for r in [0, rows) on up to `threads` OpenMP threads; body must
// touch only row r's outputs.
template <class Body>
void for_rows(int threads, std::int64_t rows, Body&& body) {
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1 && rows > 1)
  for (std::int64_t r = 0; r < rows; ++r) body(r);
}

}  // namespace strata::rt

namespace strata::rt {

// Elements per parallel chunk of an elementwise kernel: large enough that a
// thread's share outweighs OpenMP's start-up (a few microseconds).
inline constexpr std::int64_t kElementwiseChunk = 1 << 15;

// Runs body(begin, count) over [0, numel) in chunks on up to `threads` threads.
template <class Body>
void for_chunks(int threads, std::int64_t numel, Body&& body) {
  const std::int64_t chunks = (numel + kElementwiseChunk - 1) / kElementwiseChunk;
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1 && chunks > 1)
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::int64_t begin = c * kElementwiseChunk;
    body(begin, std::min(kElementwiseChunk, numel - begin));
  }
}

}  // namespace strata::rt
