// Memory one GPU needs for a plan, per pipeline stage, and whether it fits.
//
// Model states follow the ZeRO paper (Rajbhandari et al. 2020, section 3.1):
// mixed-precision Adam keeps 2 bytes of weights and 2 of gradients per parameter
// in bf16/fp16, plus K = 12 bytes of optimizer state (fp32 master weights,
// momentum and variance). Gradients accumulated in fp32 (Megatron-LM's default
// with bf16) take 4 bytes: Megatron's distributed-optimizer table gives
// 6 + 12/d bytes per parameter for bf16 weights with fp32 gradients. ZeRO stage 1 shards the optimizer state over dp, stage 2
// the gradients too, stage 3 the weights too.
// Activations follow Korthikanti et al. 2022 (section 4), generalised term by
// term to grouped-query attention, gated MLPs and dropout-free models.
// docs/memory.md gives every formula with its source.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/model_spec.h"
#include "plan/plan_spec.h"

namespace strata {

// What the memory model needs of the device: its capacity and what the framework
// and the allocator keep of it (the device profile's "device.memory_bytes" and
// "memory" section; sim/device_memory.h reads them from a Profile).
struct DeviceMemory {
  double capacity_bytes = 0.0;
  double framework_reserve_bytes = 0.0;
  // Share of the tensors' bytes lost to caching-allocator fragmentation.
  double allocator_fragmentation = 0.0;
};

// Named parameters of the memory model (documented in docs/memory.md).
struct MemoryModelOptions {
  // Optimizer state per parameter: fp32 master weights + Adam's two moments
  // (mixed precision); fp32 training keeps only the two moments (8 bytes).
  double optimizer_bytes_per_param = 12.0;
  // Host bytes per offloaded parameter: the optimizer state plus a 2-byte
  // gradient copy (ZeRO-Offload, Ren et al. 2021, section 4.1).
  double offload_host_bytes_per_param = 14.0;
};

// Activation bytes one GPU stores for one layer and one micro-batch, by part.
struct LayerActivations {
  double attention_bytes = 0.0;  // stored by the attention block
  double mlp_bytes = 0.0;        // stored by the MLP block
  double norm_bytes = 0.0;       // inputs of the two normalizations
  double total() const { return attention_bytes + mlp_bytes + norm_bytes; }
};

struct StageMemory {
  int stage = 0;
  int layers = 0;                       // transformer layers on this pipeline rank
  std::int64_t params = 0;              // parameters held before ZeRO sharding
  double layer_microbatches_in_flight = 0.0;  // layer activations stored at the peak
  // Zero-bubble schedules: of activations_bytes, the inputs deferred W's hold
  // at the peak (the weight GEMMs' inputs and output gradients); 0 otherwise.
  double weight_grad_bytes = 0.0;
  double params_bytes = 0.0;
  double grads_bytes = 0.0;
  double optimizer_bytes = 0.0;
  double activations_bytes = 0.0;       // incl. weight_grad_bytes
  double buffers_bytes = 0.0;           // pipeline, gradient-bucket and ZeRO-3 gather buffers
  double reserve_bytes = 0.0;           // framework reserve + allocator fragmentation
  double total_bytes = 0.0;
  double host_bytes = 0.0;              // host memory for offloaded optimizer state
  // MoE models: of params, the routed experts' (num_experts / ep per MoE layer,
  // split over etp); of the weights, gradients and optimizer bytes, theirs
  // (sharded by ZeRO over the expert data-parallel group, not dp*cp).
  std::int64_t expert_params = 0;
  double expert_state_bytes = 0.0;
  bool fits = false;
};

struct MemoryReport {
  std::vector<StageMemory> stages;
  double capacity_bytes = 0.0;
  double peak_bytes = 0.0;
  int peak_stage = 0;
  bool fits = false;
  double host_bytes_per_gpu = 0.0;      // worst stage
  LayerActivations layer_activations;   // per dense layer, per micro-batch, per GPU
  // MoE models (plan/moe_memory.h): an MoE layer's, and the expert data-parallel size.
  bool moe = false;
  LayerActivations moe_layer_activations;
  int expert_data_parallel = 0;
};

// Stored activations of one layer for one micro-batch on one GPU.
LayerActivations layer_activation_bytes(const ModelSpec& m, const PlanSpec& p);

// Layer-micro-batches whose activations a pipeline rank stores at its peak:
// GPipe all m; 1F1B min(p - stage, m); interleaved min(m*v, 2(p-stage-1) + (v-1)p + 1)
// chunks of L/(p*v) layers (Megatron-LM's warm-up count plus the one in steady state).
// Zero-bubble schedules (kZbH1, kZbH2, kZbV) walk the rank's program instead: a
// micro-batch holds its full activations from F to B, then only what W needs.
double layer_microbatches_in_flight(const ModelSpec& m, const PlanSpec& p, int stage);

// What one layer's deferred W keeps from B until it runs, per micro-batch on one
// GPU: each weight GEMM's input and output gradient (Qi et al. 2024, table 1:
// M_W = 32sbh bytes for a GPT layer, against M_B = sb(34h + 5as)).
double weight_grad_input_bytes(const ModelSpec& m, const PlanSpec& p);

// The micro-batches a zero-bubble program holds at its peak of
// full * full_bytes + waiting * weight_grad_bytes: with full activations (F
// done, B not) and with only W's inputs (B done, W not). ZB-H1's peak is p full
// ones on stage 0; ZB-H2's 2p - 1 (the paper's section 2.3).
// zb-v counts chunk micro-batches (half a stage's layers each);
// waiting_last_chunk are those of the chunk with the last virtual stage (with
// the output layer's W inputs on the rank that holds it).
struct ZeroBubbleHeld {
  int full = 0;
  int waiting_weight_grads = 0;
  int waiting_last_chunk = 0;
};
ZeroBubbleHeld zero_bubble_held(const PlanSpec& p, int stage, double full_bytes, double weight_grad_bytes);

MemoryReport memory_report(const ModelSpec& m, const PlanSpec& p, const DeviceMemory& device,
                           const MemoryModelOptions& options = {});

}  // namespace strata

namespace strata {
// The report as JSON: per-stage breakdown in bytes, peak, capacity, fits.
nlohmann::ordered_json to_json(const MemoryReport& report);
}  // namespace strata
