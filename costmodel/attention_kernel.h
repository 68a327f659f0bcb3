// Attention kernels as published benchmarks measured them: a kernel's achieved
// TFLOP/s per GPU over sequence length, per head dimension, causal or not,
// forward, backward or both (scenarios/attention-kernels/*.json, every curve
// with its source). A framework profile names the kernel its software runs
// (costmodel/framework_profile.h); the device profile's own attention model is
// what a GPU without a curve for that kernel gets.
//
// FLOPs follow the benchmarks' convention (FlashAttention-2 paper §4.1;
// attention_flops in cost_queries.h): forward 4·s²·d per head, halved with a
// causal mask, backward 2.5× forward, so time = those FLOPs / the curve's rate.
// The schema is documented in docs/formats.md ("attention kernel").
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace strata {

enum class AttentionPass { kForward, kBackward, kForwardBackward };

struct AttentionCurve {
  std::vector<std::string> devices;  // device profile names it was measured on
  AttentionPass pass = AttentionPass::kForward;
  bool causal = false;
  int head_dim = 0;
  std::vector<double> seq;                 // increasing
  std::vector<double> flops_per_s;         // at each seq
  std::string source;
};

// What a rate was read from, for the cost origin.
struct AttentionRate {
  double flops_per_s = 0.0;
  const AttentionCurve* curve = nullptr;
};

struct AttentionKernel {
  std::string name;
  std::string file;
  std::string description;
  std::string source;
  std::vector<AttentionCurve> curves;

  // The rate of one pass on `device`, or nothing when no curve was measured on
  // it. Of the curves for the device: the head dimension nearest to head_dim
  // (in log2; the larger on a tie); then the pass itself with the same mask, else
  // forward+backward with the same mask (the published combined rate for both
  // passes), else the same for the causal-free curves (a causal pass then skips
  // exactly the masked half: optimistic at short sequences). Between measured
  // sequence lengths the rate is interpolated in log2(seq); outside them it is
  // held at the nearest end.
  std::optional<AttentionRate> rate(const std::string& device, bool causal, std::int64_t head_dim,
                                    std::int64_t seq, bool backward) const;
  // True when some curve was measured on `device`.
  bool measured_on(const std::string& device) const;
};

AttentionKernel read_attention_kernel(const nlohmann::json& doc, const std::string& file);
// Resolves a path or shipped name (scenarios/attention-kernels/) and reads it.
AttentionKernel load_attention_kernel(const std::string& path_or_name);
// load_attention_kernel, read once per process and name (thread-safe).
const AttentionKernel& attention_kernel(const std::string& path_or_name);

}  // namespace strata
