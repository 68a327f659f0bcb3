#include "importers/calculon.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "core/data_paths.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/json_reader.h"
#include "core/units.h"
#include "costmodel/profile.h"
#include "plan/model_spec.h"
#include "plan/plan_spec.h"
#include "topologies/cluster_spec.h"

namespace strata::importers {
namespace {

constexpr int kBig = 1 << 24;
// How far a shipped profile's datasheet peak, or a node preset's NVLink rate,
// may sit from the Calculon system's figure and still be "the same part": the
// shipped Calculon H100 system rounds the datasheet's 989.4 dense fp16 TFLOP/s to
// 1000 (1.1%); a different part is tens of percent away (A100 312, H100 989, H200 989
// with 141 GB, told apart by memory).
constexpr double kSamePartTolerance = 0.05;

// Calculon's vocabulary: llm.py's parameter count, (51200 + seq_size) * hidden
// for the embeddings (learned positions, one matrix shared with the output layer).
constexpr int kCalculonVocabulary = 51200;

// Calculon's datatype names and Strata's.
std::optional<DType> strata_dtype(const std::string& calculon) {
  if (calculon == "float16") return DType::kFp16;
  if (calculon == "bfloat16") return DType::kBf16;
  if (calculon == "float32") return DType::kFp32;
  return std::nullopt;
}

// Calculon's ops and efficiency tables are its own calibration; they are read
// only to be refused when malformed, as Calculon would.
void skip(json::ObjectReader& r, const std::string& key) { (void)r.raw(key); }

double relative_gap(double a, double b) { return std::abs(a - b) / b; }

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

struct ProfileMatch {
  std::string name;
  double peak_tflops = 0.0;
  double memory_gib = 0.0;
};

// The shipped profile named, or the one whose peak for dtype is within
// kSamePartTolerance of tflops, the nearest in memory when several are.
ProfileMatch match_profile(const CalculonSystem& system, DType dtype, double tflops, const std::string& wanted,
                           const std::string& system_file, const std::string& datatype) {
  std::vector<ProfileMatch> candidates;
  std::string listed;
  for (const std::string& name : shipped_names("calib/profiles")) {
    const Profile profile = load_profile(name);
    ProfileMatch m{name, profile.device.peak_flops(dtype) / 1e12, profile.device.memory_bytes / kGiB};
    listed += fmt::format("{}{} ({:g} TFLOP/s, {:g} GiB)", listed.empty() ? "" : ", ", name, m.peak_tflops,
                          m.memory_gib);
    if (!wanted.empty()) {
      if (name == wanted) return m;
      continue;
    }
    if (relative_gap(m.peak_tflops, tflops) <= kSamePartTolerance) candidates.push_back(m);
  }
  if (!wanted.empty()) {
    throw InputError("", "--profile", fmt::format("no shipped profile \"{}\"; shipped: {}", wanted, listed));
  }
  if (candidates.empty()) {
    throw InputError(system_file, fmt::format("$.matrix.{}.tflops", datatype),
                     fmt::format("{:g} TFLOP/s matches no shipped device profile within {:g}%: {}; name one with "
                                 "--profile, or calibrate one (`strata calibrate`)",
                                 tflops, kSamePartTolerance * 100.0, listed));
  }
  std::stable_sort(candidates.begin(), candidates.end(), [&](const ProfileMatch& a, const ProfileMatch& b) {
    return std::abs(a.memory_gib - system.mem1_gib) < std::abs(b.memory_gib - system.mem1_gib);
  });
  return candidates.front();
}

// The shipped node preset named, or the one of `gpus` GPUs whose NVLink rate is
// within kSamePartTolerance of the network's, preferring the profile's GPU.
NodeSpec match_node(const CalculonNetwork& net, const std::string& profile, const std::string& wanted,
                    const std::string& system_file) {
  std::vector<NodeSpec> candidates;
  std::string listed;
  for (const std::string& name : shipped_names("topologies/presets/nodes")) {
    NodeSpec node = load_node_preset(name);
    const double nvlink = node.nvlink_kind == "none" ? 0.0 : node.nvlink.bandwidth_bytes_per_s / 1e9;
    listed += fmt::format("{}{} ({} GPUs, NVLink {:g} GB/s)", listed.empty() ? "" : ", ", name, node.gpus, nvlink);
    if (!wanted.empty()) {
      if (name == wanted) {
        if (node.gpus != net.size) {
          throw InputError("", "--node",
                           fmt::format("node preset \"{}\" has {} GPUs; the system's first network ({}: $.networks[0]) "
                                       "joins {}",
                                       name, node.gpus, system_file, net.size));
        }
        return node;
      }
      continue;
    }
    if (node.gpus == net.size && nvlink > 0.0 && relative_gap(nvlink, net.bandwidth_gbytes_per_s) <= kSamePartTolerance) {
      candidates.push_back(std::move(node));
    }
  }
  if (!wanted.empty()) {
    throw InputError("", "--node", fmt::format("no shipped node preset \"{}\"; shipped: {}", wanted, listed));
  }
  if (candidates.empty()) {
    throw InputError(system_file, "$.networks[0]",
                     fmt::format("a network of {} processors at {:g} GB/s matches no shipped node preset (the GPU "
                                 "count, and the NVLink rate per direction within {:g}%): {}; name one with --node",
                                 net.size, net.bandwidth_gbytes_per_s, kSamePartTolerance * 100.0, listed));
  }
  std::stable_partition(candidates.begin(), candidates.end(),
                        [&](const NodeSpec& n) { return lower(n.gpu) == lower(profile); });
  return candidates.front();
}

}  // namespace

CalculonApplication read_calculon_application(const nlohmann::json& doc, const std::string& file,
                                              const std::string& name) {
  json::ObjectReader r(doc, file);
  CalculonApplication a;
  a.name = name;
  a.hidden = static_cast<int>(r.integer("hidden", 1, kBig));
  a.feedforward = static_cast<int>(r.integer("feedforward", 1, 1 << 28));
  a.seq_size = static_cast<int>(r.integer("seq_size", 1, kBig));
  a.attn_heads = static_cast<int>(r.integer("attn_heads", 1, kBig));
  a.attn_size = static_cast<int>(r.integer("attn_size", 1, kBig));
  a.num_blocks = static_cast<int>(r.integer("num_blocks", 1, 100000));
  r.finish();
  return a;
}

CalculonExecution read_calculon_execution(const nlohmann::json& doc, const std::string& file,
                                          const std::string& name) {
  json::ObjectReader r(doc, file);
  CalculonExecution e;
  e.name = name;
  e.num_procs = static_cast<int>(r.integer("num_procs", 1, kBig));
  e.tensor_par = static_cast<int>(r.integer("tensor_par", 1, 1 << 16));
  e.pipeline_par = static_cast<int>(r.integer("pipeline_par", 1, 1 << 16));
  e.data_par = static_cast<int>(r.integer("data_par", 1, kBig));
  e.tensor_par_net = static_cast<int>(r.integer("tensor_par_net", 0, 64));
  e.pipeline_par_net = static_cast<int>(r.integer("pipeline_par_net", 0, 64));
  e.data_par_net = static_cast<int>(r.integer("data_par_net", 0, 64));
  e.batch_size = static_cast<int>(r.integer("batch_size", 1, 1 << 30));
  e.microbatch_size = static_cast<int>(r.integer("microbatch_size", 1, 1 << 20));
  // Calculon's 8-bit types have no Strata profile peaks or memory model.
  e.datatype = r.choice("datatype", {"float16", "bfloat16", "float32"});
  e.fused_activation = r.boolean("fused_activation");
  e.attention_type = r.choice("attention_type", {"multihead", "multiquery"});
  e.activation_recompute = r.choice("activation_recompute", {"full", "attn_only", "none"});
  e.pipeline_interleaving = static_cast<int>(r.integer("pipeline_interleaving", 1, 1024));
  e.optimizer_sharding = r.boolean("optimizer_sharding");
  e.tensor_par_comm_type = r.choice("tensor_par_comm_type", {"ar", "p2p_rs_ag", "rs_ag"});
  e.tensor_par_overlap = r.choice("tensor_par_overlap", {"none", "ring", "pipe"});
  e.seq_par_ag_redo = r.boolean("seq_par_ag_redo");
  e.data_par_overlap = r.boolean("data_par_overlap");
  e.weight_offload = r.boolean("weight_offload");
  e.activations_offload = r.boolean("activations_offload");
  e.optimizer_offload = r.boolean("optimizer_offload");
  e.training = r.boolean("training");
  r.finish();

  // Calculon's own asserts (Llm.Execution.__init__), at the key each names.
  auto fail = [&](const std::string& key, const std::string& message) { throw InputError(file, "$." + key, message); };
  if (static_cast<std::int64_t>(e.tensor_par) * e.pipeline_par * e.data_par != e.num_procs) {
    fail("num_procs", fmt::format("{} must equal tensor_par * pipeline_par * data_par = {} * {} * {}", e.num_procs,
                                  e.tensor_par, e.pipeline_par, e.data_par));
  }
  if (e.batch_size % e.data_par != 0) {
    fail("batch_size", fmt::format("{} must be divisible by data_par {}", e.batch_size, e.data_par));
  }
  if ((e.batch_size / e.data_par) % e.microbatch_size != 0) {
    fail("microbatch_size", fmt::format("{} must divide the local batch batch_size / data_par = {}",
                                        e.microbatch_size, e.batch_size / e.data_par));
  }
  if (e.pipeline_par == 1 && e.pipeline_interleaving != 1) {
    fail("pipeline_interleaving", "must be 1 with pipeline_par 1");
  }
  if (e.optimizer_sharding && e.data_par == 1) fail("optimizer_sharding", "needs data_par > 1");
  if (e.tensor_par_overlap != "none" && e.tensor_par == 1) fail("tensor_par_overlap", "needs tensor_par > 1");
  if (e.seq_par_ag_redo && e.tensor_par_comm_type != "rs_ag") {
    fail("seq_par_ag_redo", "redoes sequence parallelism's all-gather: needs tensor_par_comm_type \"rs_ag\"");
  }
  if (e.seq_par_ag_redo && e.activation_recompute == "full") {
    fail("seq_par_ag_redo", "must be false with activation_recompute \"full\"");
  }
  if (e.data_par_overlap && e.data_par == 1) fail("data_par_overlap", "needs data_par > 1");
  if (!e.training) {
    fail("training", "Strata plans training steps; an inference execution (training false) has no Strata plan");
  }
  return e;
}

CalculonSystem read_calculon_system(const nlohmann::json& doc, const std::string& file, const std::string& name) {
  json::ObjectReader r(doc, file);
  CalculonSystem s;
  s.name = name;
  json::ObjectReader matrix = r.object("matrix");
  for (const auto& [datatype, entry] : matrix.value().items()) {
    json::ObjectReader dt = matrix.object(datatype);
    s.matrix_tflops.emplace_back(datatype, dt.number("tflops", 1e-6, 1e7));
    (void)dt.array("gflops_efficiency");
    dt.finish();
  }
  matrix.finish();
  skip(r, "vector");
  json::ObjectReader mem1 = r.object("mem1");
  s.mem1_gib = mem1.number("GiB", 1e-6, 1e15);
  (void)mem1.number("GBps", 1e-6, 1e9);
  (void)mem1.array("MB_efficiency");
  mem1.finish();
  skip(r, "mem2");
  (void)r.choice("processing_mode", {"roofline", "no_overlap"});
  const nlohmann::json& networks = r.array("networks");
  if (networks.empty()) r.fail("networks", "expected at least one network");
  for (std::size_t i = 0; i < networks.size(); ++i) {
    json::ObjectReader n(networks[i], file, r.element_path("networks", i));
    CalculonNetwork net;
    net.bandwidth_gbytes_per_s = n.number("bandwidth", 1e-6, 1e7);
    net.efficiency = n.number("efficiency", 1e-6, 1.0);
    net.size = static_cast<int>(n.integer("size", 1, 1 << 30));
    net.latency_s = n.number("latency", 0.0, 1e3);
    (void)n.object("ops");
    (void)n.boolean("must_be_filled");
    (void)n.number("processor_usage", 0.0, 1.0);
    n.finish();
    s.networks.push_back(net);
  }
  r.finish();
  return s;
}

ImportedScenario import_calculon(const CalculonApplication& a, const CalculonExecution& e, const CalculonSystem& s,
                                 const CalculonFiles& files, const CalculonChoices& choices) {
  ImportedScenario out;
  auto note = [&](std::string text) { out.notes.push_back(std::move(text)); };

  // --- model.json (Llm.Application) ---
  nlohmann::ordered_json& m = out.model;
  m["name"] = a.name;
  m["num_layers"] = a.num_blocks;
  m["hidden_size"] = a.hidden;
  m["num_attention_heads"] = a.attn_heads;
  if (e.attention_type == "multiquery") m["num_query_groups"] = 1;
  if (static_cast<std::int64_t>(a.attn_heads) * a.attn_size != a.hidden) m["kv_channels"] = a.attn_size;
  m["ffn_hidden_size"] = a.feedforward;
  m["seq_length"] = a.seq_size;
  m["vocab_size"] = kCalculonVocabulary;
  m["normalization"] = "layernorm";
  m["position_embedding_type"] = "learned_absolute";
  m["source"] = fmt::format(
      "Imported from Calculon's application {} by strata import calculon: Calculon's model is GPT's (two-GEMM "
      "GELU MLP with biases, LayerNorm, learned positions, a {}-word vocabulary shared with the output layer, as "
      "its llm.py counts parameters)",
      files.application, kCalculonVocabulary);
  note(fmt::format("application: Calculon's model is GPT's; model.json has vocab_size {}, learned positions, "
                   "LayerNorm, a GELU MLP with biases and one embedding matrix shared with the output layer",
                   kCalculonVocabulary));
  if (e.attention_type == "multiquery") {
    note("execution $.attention_type \"multiquery\" is a model setting in Strata (and Megatron): model.json has "
         "num_query_groups 1");
  }

  // --- plan.json (Llm.Execution) ---
  const DType dtype = *strata_dtype(e.datatype);
  nlohmann::ordered_json& p = out.plan;
  p["tp"] = e.tensor_par;
  p["pp"] = e.pipeline_par;
  p["dp"] = e.data_par;
  if (e.pipeline_interleaving > 1) p["vpp"] = e.pipeline_interleaving;
  p["micro_batch_size"] = e.microbatch_size;
  p["global_batch_size"] = e.batch_size;
  p["schedule"] = to_string(e.pipeline_interleaving > 1 ? Schedule::kInterleaved : Schedule::kOneFOneB);
  p["dtype"] = to_string(dtype);
  p["recompute"] = e.activation_recompute == "attn_only" ? "selective" : e.activation_recompute;
  p["sequence_parallel"] = e.tensor_par_comm_type == "rs_ag";
  p["zero_stage"] = e.optimizer_sharding ? 1 : 0;
  p["overlap_grad_reduce"] = e.data_par_overlap;
  // Megatron overlaps the parameter all-gather only with the gradient reduce
  // overlapped too (arguments.py); Calculon's one flag covers both.
  p["overlap_param_gather"] = e.data_par_overlap && e.optimizer_sharding;
  p["offload_optimizer"] = e.optimizer_offload;
  // get_peers_json: tensor ranks fastest, then pipeline, then data.
  p["rank_order"] = "tp-cp-ep-pp-dp";
  p["framework"] = "megatron-lm-2022";
  p["source"] = fmt::format("Imported from Calculon's execution {} by strata import calculon", files.execution);
  note("framework: Calculon models Megatron-LM as Korthikanti et al. 2022 ran it (its validation/seqsel runs); "
       "plan.json names framework \"megatron-lm-2022\": change it for your software (scenarios/frameworks)");
  note(fmt::format("execution $.tensor_par_net/pipeline_par_net/data_par_net ({}/{}/{}): Strata routes each group "
                   "over the cluster's topology from where its ranks sit; rank_order \"tp-cp-ep-pp-dp\" places them "
                   "as Calculon numbers them",
                   e.tensor_par_net, e.pipeline_par_net, e.data_par_net));
  if (e.tensor_par_comm_type == "p2p_rs_ag") {
    note("execution $.tensor_par_comm_type \"p2p_rs_ag\" (reduce-scatter before the pipeline send, all-gather "
         "after) has no Strata equivalent: imported as all-reduce tensor parallelism, whose pipeline send is the "
         "whole activation, as Megatron-Core sends it");
  }
  if (e.tensor_par_comm_type == "rs_ag" && !e.seq_par_ag_redo) {
    note("execution $.seq_par_ag_redo false: Strata gathers a column-parallel layer's input again for its weight "
         "gradient, as Megatron-LM does (Calculon's true); keeping the gathered input is not modelled");
  }
  if (e.tensor_par_overlap != "none") {
    note(fmt::format("execution $.tensor_par_overlap \"{}\": the framework profile says whether tensor-parallel "
                     "communication overlaps its GEMMs (megatron-core with Transformer Engine does), not the plan",
                     e.tensor_par_overlap));
  }
  if (e.fused_activation) {
    note("execution $.fused_activation true: the framework profile says which kernels fuse");
  }
  if (e.weight_offload || e.activations_offload) {
    note("execution $.weight_offload / $.activations_offload: not modelled by Strata; imported without them");
  }
  if (e.optimizer_offload) {
    note("execution $.optimizer_offload true: offload_optimizer true; the host's memory and link are the node's "
         "(its PCIe), not the system's mem2");
  }

  // --- cluster.json (System) ---
  const auto rate = std::find_if(s.matrix_tflops.begin(), s.matrix_tflops.end(),
                                 [&](const auto& entry) { return entry.first == e.datatype; });
  if (rate == s.matrix_tflops.end()) {
    throw InputError(files.system, "$.matrix",
                     fmt::format("has no \"{}\" entry, which the execution's datatype ({}: $.datatype) needs",
                                 e.datatype, files.execution));
  }
  const ProfileMatch profile = match_profile(s, dtype, rate->second, choices.profile, files.system, e.datatype);
  out.profile = profile.name;
  note(fmt::format("system $.matrix and $.vector (peak {:g} TFLOP/s with Calculon's efficiency tables): costed "
                   "with profile {} ({:g} TFLOP/s {}, datasheet efficiencies with their sources); `strata calibrate` "
                   "measures your GPUs'",
                   rate->second, profile.name, profile.peak_tflops, to_string(dtype)));
  if (relative_gap(profile.memory_gib, s.mem1_gib) > kSamePartTolerance) {
    note(fmt::format("system $.mem1.GiB {:g}: whether the plan fits is judged with profile {}'s {:g} GiB", s.mem1_gib,
                     profile.name, profile.memory_gib));
  }

  const CalculonNetwork& local = s.networks.front();
  if (e.num_procs < local.size || e.num_procs % local.size != 0) {
    throw InputError(files.execution, "$.num_procs",
                     fmt::format("{} processors are not whole nodes of the system's first network ({}: "
                                 "$.networks[0] joins {}): Strata's clusters are whole nodes",
                                 e.num_procs, files.system, local.size));
  }
  const NodeSpec node = match_node(local, profile.name, choices.node, files.system);
  out.node = node.name;
  const int nodes = e.num_procs / local.size;
  nlohmann::ordered_json& c = out.cluster;
  c["name"] = fmt::format("{}-{}", s.name, e.num_procs);
  c["nodes"] = nodes;
  c["gpus_per_node"] = node.gpus;
  c["node"] = node.name;
  const std::string links = node.nvlink_kind == "none"
                                ? std::string("no NVLink: its GPUs talk over PCIe")
                                : fmt::format("NVLink {:g} GB/s per direction", node.nvlink.bandwidth_bytes_per_s / 1e9);
  note(fmt::format("system $.networks[0] ({} processors, {:g} GB/s, efficiency {:g}, latency {:g} us): node preset "
                   "{} ({}; its links' efficiency and latency from NCCL's model, with sources)",
                   local.size, local.bandwidth_gbytes_per_s, local.efficiency, local.latency_s * 1e6, node.name,
                   links));
  std::size_t fabric_index = 0;  // the network the nodes are joined by (0: one node)
  if (nodes > 1) {
    std::size_t index = 1;
    while (index < s.networks.size() && s.networks[index].size < e.num_procs) ++index;
    if (index == s.networks.size()) {
      throw InputError(files.system, "$.networks",
                       fmt::format("no network after the first joins the execution's {} processors", e.num_procs));
    }
    fabric_index = index;
    const CalculonNetwork& fabric = s.networks[index];
    // Calculon's bandwidth is per processor: one NIC per GPU, as DGX nodes have;
    // a node with fewer NICs gets the node's whole share over the ones it has.
    const int nics = std::min(node.nics, node.gpus);
    if (nics == 0) {
      throw InputError(files.system, fmt::format("$.networks[{}]", index),
                       fmt::format("joins the nodes, but node preset {} has no NICs", node.name));
    }
    nlohmann::ordered_json f;
    f["kind"] = "infiniband";
    f["nics_per_node"] = nics;
    f["nic_gbps"] = fabric.bandwidth_gbytes_per_s * 8.0 * node.gpus / nics;
    f["oversubscription"] = 1;
    f["source"] = fmt::format(
        "Calculon system {} $.networks[{}]: {:g} GB/s per processor, {} NICs per node of {} GPUs on a non-blocking "
        "InfiniBand fat-tree (Calculon does not say the fabric's kind or shape)",
        files.system, index, fabric.bandwidth_gbytes_per_s, nics, node.gpus);
    c["fabric"] = std::move(f);
    note(fmt::format("system $.networks[{}] efficiency {:g} and latency {:g} us: Strata takes InfiniBand's header "
                     "overhead and switch latency (topologies/cluster_spec.cc) and NCCL's algorithm latencies",
                     index, fabric.efficiency, fabric.latency_s * 1e6));
    if (nics < node.gpus) {
      note(fmt::format("system $.networks[{}]: node preset {} has {} NICs for {} GPUs; each carries {} GPUs' "
                       "share ({:g} Gb/s)",
                       index, node.name, nics, node.gpus, node.gpus / nics,
                       fabric.bandwidth_gbytes_per_s * 8.0 * node.gpus / nics));
    }
  }
  for (std::size_t i = 1; i < s.networks.size(); ++i) {
    if (i == fabric_index) continue;
    note(fmt::format("system $.networks[{}] ({} processors): not carried; Strata's cluster is the node and, across "
                     "nodes, the first network that joins every processor",
                     i, s.networks[i].size));
  }
  c["profile"] = profile.name;
  c["source"] = fmt::format("Imported from Calculon's system {} by strata import calculon", files.system);
  return out;
}

}  // namespace strata::importers
