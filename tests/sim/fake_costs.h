// Hand-computable costs for simulator tests.
#pragma once

#include "sim/workload/costs.h"

namespace strata::sim::testing {

// Every GEMM of a layer costs `gemm_ns`, so a layer's backward (a data- and a
// weight-gradient GEMM per forward GEMM) costs exactly twice its forward.
// Memory-bound ops, the optimizer and the output layer's logits GEMM (n or k
// equal to the vocabulary slice) are free, so stages are uniform.
class GemmCountCosts : public OpCosts {
 public:
  GemmCountCosts(TimeNs gemm_ns, std::int64_t vocab_slice) : gemm_ns_(gemm_ns), vocab_(vocab_slice) {}
  Duration gemm(const GemmShape& s, DType) const override {
    return (s.n == vocab_ || s.k == vocab_ || s.m == vocab_) ? Duration() : Duration::from_ns(gemm_ns_);
  }
  Duration elementwise(OpRole, double, DType) const override { return {}; }
  Duration attention(const AttentionBlock&, bool, DType) const override { return {}; }
  Duration optimizer(double) const override { return {}; }
  Duration host_copy(double) const override { return {}; }
  Duration device_copy(double) const override { return {}; }
  Duration host_optimizer(double) const override { return {}; }

 private:
  TimeNs gemm_ns_;
  std::int64_t vocab_;
};

// GemmCountCosts, and every copy within device memory costs `copy_ns`.
class GemmAndCopyCosts : public GemmCountCosts {
 public:
  GemmAndCopyCosts(TimeNs gemm_ns, std::int64_t vocab_slice, TimeNs copy_ns)
      : GemmCountCosts(gemm_ns, vocab_slice), copy_(Duration::from_ns(copy_ns)) {}
  Duration device_copy(double) const override { return copy_; }

 private:
  Duration copy_;
};

// Every compute op (GEMM, memory-bound op, attention, the optimizer) costs
// `op_ns`: a step of K ops on one GPU takes K * op_ns.
class UniformCosts : public OpCosts {
 public:
  explicit UniformCosts(TimeNs op_ns) : d_(Duration::from_ns(op_ns)) {}
  Duration gemm(const GemmShape&, DType) const override { return d_; }
  Duration elementwise(OpRole, double, DType) const override { return d_; }
  Duration attention(const AttentionBlock&, bool, DType) const override { return d_; }
  Duration optimizer(double) const override { return d_; }
  Duration host_copy(double) const override { return d_; }
  Duration device_copy(double) const override { return d_; }
  Duration host_optimizer(double) const override { return d_; }

 private:
  Duration d_;
};

// Communication that takes no time.
class FreeComm : public CommCosts {
 public:
  CommSpec collective(CollectiveOp, const std::vector<int>&, double) const override { return {}; }
  CommSpec p2p(int, int, double) const override { return {}; }
};

// alpha + bytes / bandwidth for every transfer, without links.
class AlphaBetaComm : public CommCosts {
 public:
  AlphaBetaComm(TimeNs alpha_ns, double bytes_per_s) : alpha_(alpha_ns), bw_(bytes_per_s) {}
  CommSpec collective(CollectiveOp, const std::vector<int>&, double bytes) const override {
    return spec(bytes);
  }
  CommSpec p2p(int, int, double bytes) const override { return spec(bytes); }

 private:
  CommSpec spec(double bytes) const {
    CommSpec s;
    s.fixed = Duration::from_ns(alpha_);
    s.bytes = bytes;
    s.rate_cap_bytes_per_s = bw_;
    return s;
  }
  TimeNs alpha_;
  double bw_;
};

// Each GPU g has one link, numbered g: a collective loads each member's link
// with (its position + 1) / 10 bytes per byte (unequal, so a test can tell the
// links apart), at 1 GB/s alone.
class LinkCountComm : public CommCosts {
 public:
  CommSpec collective(CollectiveOp, const std::vector<int>& group, double bytes) const override {
    CommSpec s;
    s.bytes = bytes;
    s.rate_cap_bytes_per_s = 1e9;
    for (std::size_t i = 0; i < group.size(); ++i) {
      s.links.push_back(group[i]);
      s.link_weights.push_back(static_cast<double>(i + 1) / 10.0);
    }
    return s;
  }
  CommSpec p2p(int src, int dst, double bytes) const override { return collective(CollectiveOp::kSendRecv, {src, dst}, bytes); }
};

}  // namespace strata::sim::testing
