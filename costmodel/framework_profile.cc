#include "costmodel/framework_profile.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>

#include "core/data_paths.h"
#include "core/error.h"
#include "core/json_reader.h"
#include "costmodel/attention_kernel.h"

namespace strata {
namespace {

ModuleGather read_module_gather(json::ObjectReader r) {
  ModuleGather g;
  // Element counts: at least one element, at most 2^40 (a trillion-parameter
  // module would be one bucket).
  constexpr std::int64_t kMax = std::int64_t{1} << 40;
  g.prefetch_bucket_elements = r.integer("prefetch_bucket_elements", 1, kMax);
  g.max_live_elements = r.integer("max_live_elements", 1, kMax);
  g.max_reuse_distance_elements = r.integer("max_reuse_distance_elements", 0, kMax);
  g.persistence_threshold_elements = r.integer("persistence_threshold_elements", 0, kMax);
  g.reduce_bucket_elements = r.integer("reduce_bucket_elements", 1, kMax);
  g.synchronize = r.boolean("synchronize");
  g.copy_per_rank = r.boolean("copy_per_rank");
  g.copy_issue_us = r.number_or("copy_issue_us", 0.0, 0.0, 1000.0);
  if (g.copy_issue_us > 0.0 && !g.copy_per_rank) {
    r.fail("copy_issue_us", "is the host's time to issue each per-rank copy: it needs copy_per_rank true");
  }
  g.source = r.string("source");
  r.allow_text("notes");
  r.finish();
  return g;
}

ShardedDataParallel read_sharded(json::ObjectReader r) {
  ShardedDataParallel s;
  if (r.has("module_gather")) {
    // Per-module gathering has its own prefetch rule: the layer-level keys would
    // say something the simulation does not do.
    for (const char* key : {"backward_prefetch", "unsharded_layers"}) {
      if (r.has(key)) r.fail(key, "does not apply with module_gather (modules are prefetched by its own keys)");
    }
    s.module_gather = read_module_gather(r.object("module_gather"));
  } else {
    const std::string prefetch = r.choice("backward_prefetch", {"pre", "post", "none"});
    s.backward_prefetch = prefetch == "pre"    ? BackwardPrefetch::kPre
                          : prefetch == "post" ? BackwardPrefetch::kPost
                                               : BackwardPrefetch::kNone;
    s.unsharded_layers = static_cast<int>(r.integer("unsharded_layers", 1, 64));
  }
  s.reduce_stream = r.choice("reduce_stream", {"own", "gathers"}) == "own" ? ReduceStream::kOwn : ReduceStream::kGathers;
  s.gather_copy_out = r.choice_or("gather_copy_out", "none", {"none", "compute"}) == "compute";
  s.reduce_copy_in = r.boolean_or("reduce_copy_in", false);
  if (s.module_gather && (s.gather_copy_out || s.reduce_copy_in)) {
    r.fail(s.gather_copy_out ? "gather_copy_out" : "reduce_copy_in",
           "is FSDP2's, with layer granularity; module_gather says its copies with copy_per_rank");
  }
  s.source = r.string("source");
  r.allow_text("notes");
  r.finish();
  return s;
}

FrameworkAttention read_attention(json::ObjectReader r) {
  FrameworkAttention a;
  auto check = [&](const std::string& kernel, const std::string& path) {
    try {
      attention_kernel(kernel);
    } catch (const InputError& e) {
      if (e.file() != kernel) throw;  // the kernel file itself is at fault
      throw InputError(r.file(), path, e.message());
    }
  };
  a.kernel = r.string("kernel");
  check(a.kernel, r.path_of("kernel"));
  if (r.has("kernel_by_device")) {
    json::ObjectReader by = r.object("kernel_by_device");
    for (auto it = by.value().begin(); it != by.value().end(); ++it) {
      a.kernel_by_device[it.key()] = by.string(it.key());
      check(a.kernel_by_device[it.key()], by.path_of(it.key()));
    }
    by.finish();
  }
  a.source = r.string("source");
  r.allow_text("notes");
  r.finish();
  return a;
}

HostDispatch read_host_dispatch(json::ObjectReader r) {
  HostDispatch h;
  const std::string mode = r.choice("mode", {"eager", "compiled", "cuda_graphs"});
  h.mode = mode == "eager" ? DispatchMode::kEager : mode == "compiled" ? DispatchMode::kCompiled : DispatchMode::kCudaGraphs;
  // 1 ms per kernel would be a host a thousand times slower than any measured one.
  h.per_kernel_us = r.number("per_kernel_us", 0.0, 1000.0);
  h.source = r.string("source");
  r.allow_text("notes");
  r.finish();
  return h;
}

// Transformer Engine's names for the GEMMs userbuffers can overlap
// (TransformerLayerTPOverlapCfg in NeMo's recipes).
const std::vector<std::string>& te_gemm_names() {
  static const std::vector<std::string> names = {"qkv_fprop", "qkv_dgrad", "qkv_wgrad", "proj_fprop", "proj_dgrad",
                                                 "fc1_fprop", "fc1_dgrad", "fc1_wgrad", "fc2_fprop", "fc2_dgrad"};
  return names;
}

TpOverlap read_tp_overlap(json::ObjectReader r) {
  TpOverlap t;
  json::ObjectReader gemms = r.object("gemms");
  for (auto it = gemms.value().begin(); it != gemms.value().end(); ++it) {
    const std::vector<std::string>& names = te_gemm_names();
    if (std::find(names.begin(), names.end(), it.key()) == names.end()) {
      std::string allowed;
      for (const std::string& n : names) allowed += (allowed.empty() ? "" : ", ") + n;
      throw InputError(gemms.file(), gemms.path_of(it.key()), "unknown GEMM; allowed: " + allowed);
    }
    json::ObjectReader g = gemms.object(it.key());
    TpOverlapGemm c;
    const std::string method = g.choice("method", {"ring_exchange", "pipeline", "bulk"});
    c.method = method == "ring_exchange" ? TpOverlapMethod::kRingExchange
               : method == "pipeline"    ? TpOverlapMethod::kPipeline
                                         : TpOverlapMethod::kBulk;
    // TE's RingExchangeOverlapCfg defaults to one SM; pipeline and bulk name theirs.
    c.num_sm = c.method == TpOverlapMethod::kRingExchange ? static_cast<int>(g.integer_or("num_sm", 1, 0, 64))
                                                          : static_cast<int>(g.integer("num_sm", 0, 64));
    c.num_splits = c.method == TpOverlapMethod::kPipeline ? static_cast<int>(g.integer("num_splits", 1, 64)) : 1;
    g.allow_text("notes");
    g.finish();
    t.gemms[it.key()] = c;
  }
  gemms.finish();
  t.source = r.string("source");
  r.allow_text("notes");
  r.finish();
  return t;
}

TpAsyncBackward read_tp_async_backward(json::ObjectReader r) {
  TpAsyncBackward t;
  t.num_sm = static_cast<int>(r.integer_or("num_sm", 0, 0, 64));
  t.source = r.string("source");
  r.allow_text("notes");
  r.finish();
  return t;
}

PipelineP2p read_pipeline_p2p(json::ObjectReader r) {
  PipelineP2p p;
  p.blocking = r.choice("blocking", {"always", "without_interleaving"}) == "always"
                   ? BlockingSends::kAlways
                   : BlockingSends::kWithoutInterleaving;
  p.scatter_gather = r.boolean_or("scatter_gather", false);
  p.source = r.string("source");
  r.allow_text("notes");
  r.finish();
  return p;
}

}  // namespace

const char* to_string(BlockingSends b) {
  return b == BlockingSends::kAlways ? "always" : "without_interleaving";
}

const char* to_string(TpOverlapMethod m) {
  switch (m) {
    case TpOverlapMethod::kRingExchange: return "ring_exchange";
    case TpOverlapMethod::kPipeline: return "pipeline";
    case TpOverlapMethod::kBulk: return "bulk";
    case TpOverlapMethod::kNcclBeside: return "nccl_beside";
  }
  return "?";
}

const char* to_string(DispatchMode m) {
  switch (m) {
    case DispatchMode::kEager: return "eager";
    case DispatchMode::kCompiled: return "compiled";
    case DispatchMode::kCudaGraphs: return "cuda_graphs";
  }
  return "?";
}

const char* to_string(BackwardPrefetch p) {
  switch (p) {
    case BackwardPrefetch::kPre: return "pre";
    case BackwardPrefetch::kPost: return "post";
    case BackwardPrefetch::kNone: return "none";
  }
  return "?";
}

const char* to_string(ReduceStream s) { return s == ReduceStream::kOwn ? "own" : "gathers"; }

FrameworkProfile read_framework_profile(const nlohmann::json& doc, const std::string& file) {
  json::ObjectReader r(doc, file);
  FrameworkProfile f;
  f.file = file;
  f.name = r.string("name");
  f.description = r.string("description");
  f.source = r.string("source");
  r.allow_text("notes");
  if (r.has("sharded_data_parallel")) f.sharded = read_sharded(r.object("sharded_data_parallel"));
  if (r.has("attention")) f.attention = read_attention(r.object("attention"));
  if (r.has("host_dispatch")) f.host_dispatch = read_host_dispatch(r.object("host_dispatch"));
  if (r.has("tp_overlap")) f.tp_overlap = read_tp_overlap(r.object("tp_overlap"));
  if (r.has("tp_async_backward")) f.tp_async_backward = read_tp_async_backward(r.object("tp_async_backward"));
  if (r.has("pipeline_p2p")) f.pipeline_p2p = read_pipeline_p2p(r.object("pipeline_p2p"));
  if (f.sharded && f.sharded->module_gather && f.sharded->module_gather->copy_issue_us > 0.0 && !f.host_dispatch) {
    throw InputError(file, "$.sharded_data_parallel.module_gather.copy_issue_us",
                     "is costed on the host lane, which only host_dispatch adds: give host_dispatch too, or remove it");
  }
  r.finish();
  return f;
}

FrameworkProfile load_framework_profile(const std::string& path_or_name) {
  const std::string path = resolve_data_file(path_or_name, "scenarios/frameworks", "framework");
  return read_framework_profile(json::parse_file(path), path);
}

const FrameworkProfile& framework_profile(const std::string& path_or_name) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<const FrameworkProfile>> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = loaded[path_or_name];
  if (!slot) slot = std::make_unique<const FrameworkProfile>(load_framework_profile(path_or_name));
  return *slot;
}

nlohmann::ordered_json to_json(const FrameworkProfile& f) {
  nlohmann::ordered_json j;
  j["name"] = f.name;
  j["description"] = f.description;
  j["source"] = f.source;
  if (f.sharded) {
    nlohmann::ordered_json s;
    if (const auto& g = f.sharded->module_gather) {
      s["module_gather"] = {{"prefetch_bucket_elements", g->prefetch_bucket_elements},
                            {"max_live_elements", g->max_live_elements},
                            {"max_reuse_distance_elements", g->max_reuse_distance_elements},
                            {"persistence_threshold_elements", g->persistence_threshold_elements},
                            {"reduce_bucket_elements", g->reduce_bucket_elements},
                            {"synchronize", g->synchronize},
                            {"copy_per_rank", g->copy_per_rank},
                            {"source", g->source}};
      if (g->copy_issue_us > 0.0) s["module_gather"]["copy_issue_us"] = g->copy_issue_us;
    } else {
      s["backward_prefetch"] = to_string(f.sharded->backward_prefetch);
      s["unsharded_layers"] = f.sharded->unsharded_layers;
    }
    s["reduce_stream"] = to_string(f.sharded->reduce_stream);
    if (f.sharded->gather_copy_out) s["gather_copy_out"] = "compute";
    if (f.sharded->reduce_copy_in) s["reduce_copy_in"] = true;
    s["source"] = f.sharded->source;
    j["sharded_data_parallel"] = s;
  }
  if (f.attention) {
    nlohmann::ordered_json a;
    a["kernel"] = f.attention->kernel;
    if (!f.attention->kernel_by_device.empty()) a["kernel_by_device"] = f.attention->kernel_by_device;
    a["source"] = f.attention->source;
    j["attention"] = a;
  }
  if (f.host_dispatch) {
    j["host_dispatch"] = {{"mode", to_string(f.host_dispatch->mode)},
                          {"per_kernel_us", f.host_dispatch->per_kernel_us},
                          {"source", f.host_dispatch->source}};
  }
  if (f.tp_overlap) {
    nlohmann::ordered_json gemms;
    for (const auto& [name, g] : f.tp_overlap->gemms) {
      nlohmann::ordered_json e = {{"method", to_string(g.method)}, {"num_sm", g.num_sm}};
      if (g.method == TpOverlapMethod::kPipeline) e["num_splits"] = g.num_splits;
      gemms[name] = e;
    }
    j["tp_overlap"] = {{"gemms", gemms}, {"source", f.tp_overlap->source}};
  }
  if (f.pipeline_p2p) {
    j["pipeline_p2p"] = {{"blocking", to_string(f.pipeline_p2p->blocking)},
                         {"scatter_gather", f.pipeline_p2p->scatter_gather},
                         {"source", f.pipeline_p2p->source}};
  }
  if (f.tp_async_backward) {
    j["tp_async_backward"] = {{"num_sm", f.tp_async_backward->num_sm}, {"source", f.tp_async_backward->source}};
  }
  return j;
}

}  // namespace strata
