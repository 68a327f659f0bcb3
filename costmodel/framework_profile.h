// The framework profile: what the training software makes of the GPU.
//
// The device profile says what the hardware can do; the framework profile says
// how a given software stack schedules its work on it: the order and overlap of
// its collectives today, and (as they land) its attention kernel, host dispatch
// and step costs. Shipped presets (scenarios/frameworks/) describe released
// software, each figure with its source; a plan names one with its `framework`
// key. Presets describe software, never a validation row: nothing in them is
// fitted to end-to-end training results.
// The schema is documented in docs/formats.md ("framework.json").
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace strata {

// When the gather of the next layer's weights is issued in the backward
// (PyTorch FSDP's BackwardPrefetch).
enum class BackwardPrefetch {
  kPre,   // before the current layer's gradient computation: gather and compute overlap
  kPost,  // after it (the current layer's weights freed first): overlaps the reduce-scatter only
  kNone,  // at the next layer's own pre-backward, after the current reduce-scatter is issued
};
const char* to_string(BackwardPrefetch p);

// Where the gradient reduce-scatters run.
enum class ReduceStream {
  kOwn,      // a stream of their own (FSDP's post-backward stream, DeepSpeed's reduction stream)
  kGathers,  // the same stream (communicator) as the parameter gathers, in issue order
};
const char* to_string(ReduceStream s);

// DeepSpeed ZeRO stage 3's per-module gathering: each submodule's parameters
// are gathered by hooks before its forward and its backward, one collective per
// parameter, with the next modules' parameters prefetched in the recorded
// execution order (deepspeed/runtime/zero/stage3.py's
// PartitionedParameterCoordinator). The element counts are DeepSpeed's
// zero_optimization keys.
struct ModuleGather {
  std::int64_t prefetch_bucket_elements = 50'000'000;       // stage3_prefetch_bucket_size
  std::int64_t max_live_elements = 1'000'000'000;           // stage3_max_live_parameters
  std::int64_t max_reuse_distance_elements = 1'000'000'000;  // stage3_max_reuse_distance
  std::int64_t persistence_threshold_elements = 100'000;    // stage3_param_persistence_threshold
  std::int64_t reduce_bucket_elements = 500'000'000;        // reduce_bucket_size
  // torch.cuda.synchronize() before each parameter's all-gather and at each
  // fetch: nothing overlaps a gather but the compute issued after it (DeepSpeed
  // before 2021-10, PR 1188).
  bool synchronize = false;
  // The collectives take a list of one tensor per rank (torch.distributed's
  // all_gather / reduce_scatter before *_base): PyTorch copies each rank's chunk
  // with its own kernel, after the gather and before the reduce-scatter.
  bool copy_per_rank = false;
  // With copy_per_rank: the host's time to issue each of those copies, µs (each a
  // cudaMemcpyAsync); 0: not costed. Costed on the host lane (needs host_dispatch).
  double copy_issue_us = 0.0;
  std::string source;
};

// How ZeRO-3 / fully sharded data parallelism orders its collectives.
struct ShardedDataParallel {
  BackwardPrefetch backward_prefetch = BackwardPrefetch::kPre;
  // Layers whose gathered weights may be alive at once: a layer's gather waits
  // until the layer this many before it has finished (FSDP1's limit_all_gathers
  // rate limiter, FSDP2's two all-gather outputs). At least 1.
  int unsharded_layers = 2;
  ReduceStream reduce_stream = ReduceStream::kOwn;
  // Present: parameters are gathered per module, not per layer (DeepSpeed);
  // backward_prefetch and unsharded_layers do not apply.
  std::optional<ModuleGather> module_gather;
  // The gathered flat buffer is copied into the parameters on the compute
  // stream before the layer runs (FSDP2's foreach_all_gather_copy_out), every
  // gather; false: the parameters are views into it (FSDP1's flat parameter).
  bool gather_copy_out = false;
  // The gradients are copied (and cast to the reduction dtype) into the
  // reduce-scatter's input on the compute stream after the layer's backward
  // (FSDP2's foreach_reduce_scatter_copy_in).
  bool reduce_copy_in = false;
  std::string source;
};

// Which fused attention kernel the software runs (scenarios/attention-kernels/),
// per device where it picks by GPU (Transformer Engine: cuDNN on Hopper,
// flash-attn on Ampere).
struct FrameworkAttention {
  std::string kernel;                                 // on every device not listed below
  std::map<std::string, std::string> kernel_by_device;  // device profile name -> kernel
  std::string source;
  const std::string& kernel_for(const std::string& device) const {
    auto it = kernel_by_device.find(device);
    return it == kernel_by_device.end() ? kernel : it->second;
  }
};

// How the host issues kernels: each kernel costs the host thread that issues
// it this long, and runs no earlier than its issue. Eager PyTorch launches every
// kernel from Python; with small kernels the host, not the GPU, sets the pace.
enum class DispatchMode {
  kEager,       // one host call per kernel (PyTorch eager, Python-side modules)
  kCompiled,    // generated launcher code (torch.compile without CUDA graphs)
  kCudaGraphs,  // one graph launch replays the kernels (per_kernel_us: the GPU-side gap)
};
const char* to_string(DispatchMode m);

struct HostDispatch {
  DispatchMode mode = DispatchMode::kEager;
  double per_kernel_us = 0.0;  // host time per kernel issued
  std::string source;
};

// Transformer Engine's tensor-parallel communication overlap (userbuffers;
// Megatron-Core's --tp-comm-overlap, NeMo's tp_comm_overlap), per GEMM as TE
// names them ("qkv_fprop", "proj_dgrad", "fc1_wgrad", ...): the collective next
// to that GEMM runs under it.
enum class TpOverlapMethod {
  kRingExchange,  // the GEMM in tp chunks, each chunk's transfer under the previous chunk (p2p)
  kPipeline,      // the GEMM in num_splits chunks, each chunk's collective under the next (on num_sm SMs)
  kBulk,          // the whole collective beside the whole GEMM (on num_sm SMs)
  // Not a TE method: a collective on NCCL's stream beside the GEMM, its kernel
  // holding num_sm SMs (0: its NCCL channels) only while it runs
  // (tp_async_backward).
  kNcclBeside,
};
const char* to_string(TpOverlapMethod m);

struct TpOverlapGemm {
  TpOverlapMethod method = TpOverlapMethod::kRingExchange;
  int num_sm = 1;      // SMs the communication kernels take from the GEMM
  int num_splits = 1;  // pipeline: chunks of the GEMM
};

struct TpOverlap {
  std::map<std::string, TpOverlapGemm> gemms;  // TE's names: qkv_fprop, fc2_dgrad, fc1_wgrad, ...
  std::string source;
};

// Megatron-LM's asynchronous backward of a column-parallel layer (QKV, fc1, the
// logits): the sequence-parallel all-gather of the layer input is launched
// before the data-gradient GEMM and the input gradient's all-reduce (or
// reduce-scatter) before the weight-gradient GEMM, each on NCCL's stream beside
// the GEMM (Megatron-LM since 2021-08; Transformer Engine's Linear the same way).
struct TpAsyncBackward {
  int num_sm = 0;  // SMs NCCL's kernels take from the GEMM beside them (0: its channels, as NCCL picks them)
  std::string source;
};

// Whether a pipeline stage's compute waits for its own sends: Megatron's p2p
// waits on every request of a batched send/recv (and synchronizes the device)
// before the schedule goes on, unless it overlaps p2p with compute.
enum class BlockingSends {
  kAlways,               // every schedule (Megatron-LM before its p2p overlap, 2023-05)
  kWithoutInterleaving,  // 1F1B; the interleaved schedule overlaps them (overlap_p2p_comm)
};
const char* to_string(BlockingSends b);

struct PipelineP2p {
  BlockingSends blocking = BlockingSends::kAlways;
  // Without sequence parallelism each tensor-parallel rank sends 1/tp of the
  // activation and the receivers all-gather it (Megatron-LM's scatter/gather
  // optimisation, 2021-2023); false: each sends the whole tensor.
  bool scatter_gather = false;
  std::string source;
  // Whether a plan with `vpp` model chunks per stage waits for its sends.
  bool blocks(int vpp) const { return blocking == BlockingSends::kAlways || vpp <= 1; }
};

struct FrameworkProfile {
  std::string name;
  std::string file;  // where it was read from
  std::string description;
  std::string source;
  // How it orders ZeRO-3 collectives; absent for software without ZeRO-3 (a
  // plan with zero_stage 3 naming such a framework is an input error).
  std::optional<ShardedDataParallel> sharded;
  // Its fused attention kernel (plans with flash_attention); absent: the device
  // profile's attention model.
  std::optional<FrameworkAttention> attention;
  // What issuing a kernel costs the host; absent: kernels are issued ahead of
  // the GPU at no cost (a compiled runtime whose launch cost no measurement gives).
  std::optional<HostDispatch> host_dispatch;
  // Tensor-parallel collectives overlapped with GEMMs (plans with tp > 1 and
  // sequence parallelism, as TE requires); absent: every one runs alone.
  std::optional<TpOverlap> tp_overlap;
  // Column-parallel backward collectives beside the GEMMs (any tp > 1); the
  // GEMMs tp_overlap names keep its method. Absent: they run in turn.
  std::optional<TpAsyncBackward> tp_async_backward;
  // Pipeline sends the stage's compute waits for; absent: sends run beside the
  // next compute (Strata's runtime: nonblocking MPI/NCCL sends).
  std::optional<PipelineP2p> pipeline_p2p;
};

// Reads a framework profile strictly; file names it in errors.
FrameworkProfile read_framework_profile(const nlohmann::json& doc, const std::string& file);
// Resolves a path or shipped name (scenarios/frameworks/) and reads it.
FrameworkProfile load_framework_profile(const std::string& path_or_name);
// load_framework_profile, read once per process and name (thread-safe): what the
// simulator uses to find the profile a plan names.
const FrameworkProfile& framework_profile(const std::string& path_or_name);
// The profile as JSON (the schema read_framework_profile accepts).
nlohmann::ordered_json to_json(const FrameworkProfile& profile);

}  // namespace strata
