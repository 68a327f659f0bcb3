// strata memory: per-GPU memory per pipeline stage, and whether the plan fits.
#include <iostream>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/scenario_options.h"
#include "core/atomic_file.h"
#include "plan/flops.h"
#include "plan/memory_model.h"
#include "plan/moe_spec.h"
#include "plan/params.h"
#include "plan/pipeline_split.h"
#include "sim/scenario.h"
#include "sim/device_memory.h"

namespace strata::cli {
namespace {

struct MemoryArgs {
  ScenarioArgs scenario;
  std::string json_file;
};

// An MoE plan's expert keys ("" for a dense model's plan).
std::string moe_summary(const PlanSpec& p) {
  if (!p.moe.active) return "";
  const std::string capacity = p.moe.expert_capacity_factor > 0.0
                                   ? fmt::format("capacity factor {}{}", p.moe.expert_capacity_factor,
                                                 p.moe.pad_to_capacity ? ", padded" : "")
                                   : fmt::format("dropless, routing imbalance {}", p.moe.router_imbalance);
  return fmt::format(", ep {} etp {} ({} dispatcher, {}{}{})", p.moe.ep, p.moe.etp, to_string(p.moe.token_dispatcher),
                     capacity, p.moe.grouped_gemm ? ", grouped GEMM" : "",
                     p.moe.shared_expert_overlap ? ", shared experts beside the exchanges" : "");
}

std::string plan_summary(const PlanSpec& p) {
  std::string stages;
  if (p.first_stage_layers > 0) stages += fmt::format(", first stage {} layers", p.first_stage_layers);
  if (p.last_stage_layers > 0) stages += fmt::format(", last stage {} layers", p.last_stage_layers);
  if (p.account_for_embedding) stages += ", embedding counted as a layer";
  if (p.account_for_loss) stages += ", loss counted as a layer";
  return fmt::format("tp {}{} pp {} dp {} vpp {}{}{}, micro-batch {}, global batch {}, {}, ZeRO {}{}, "
                     "recompute {}{}{}",
                     p.tp, p.cp > 1 ? fmt::format(" cp {} ({})", p.cp, to_string(p.cp_comm_type)) : std::string(),
                     p.pp, p.dp, p.vpp, stages, moe_summary(p), p.micro_batch_size, p.global_batch_size,
                     to_string(p.schedule), p.zero_stage, p.offload_optimizer ? " + offload" : "",
                     recompute_label(p), p.sequence_parallel ? ", sequence parallel" : "",
                     p.flash_attention ? ", flash attention" : "");
}

// An MoE model's parameters: total and those a token passes ("" for a dense model).
std::string active_parameters(const ModelSpec& m) {
  if (!m.is_moe()) return "";
  return fmt::format(", {} active: {} of {} experts x {} MoE layers", count(static_cast<double>(active_params(m))),
                     m.moe.moe_router_topk, m.moe.num_experts, m.num_moe_layers());
}

// An MoE model's table: the expert part of each stage (its parameters and their
// weights, gradients and optimizer states, already in those columns) beside it.
void print_moe_stages(const Scenario& s, const MemoryReport& r) {
  fmt::print("{:>5} {:>6} {:>4} {:>10} {:>10} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}  {}\n", "stage",
             "layers", "moe", "params", "experts", "weights", "grads", "optimizer", "expert st.", "activation",
             "buffers", "reserve", "total", "");
  const PipelineSplit split = pipeline_split(s.model, s.plan);
  for (const StageMemory& st : r.stages) {
    fmt::print("{:>5} {:>6} {:>4} {:>10} {:>10} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}  {}\n",
               st.stage, st.layers, split.stage_moe_layers(s.model, st.stage), count(static_cast<double>(st.params)),
               count(static_cast<double>(st.expert_params)), gib(st.params_bytes), gib(st.grads_bytes),
               gib(st.optimizer_bytes), gib(st.expert_state_bytes), gib(st.activations_bytes), gib(st.buffers_bytes),
               gib(st.reserve_bytes), gib(st.total_bytes), st.fits ? "fits" : "DOES NOT FIT");
  }
  const PlanSpec& p = s.plan;
  fmt::print("\nexperts  {} of {} routed experts per MoE layer on each GPU (ep {}), each split over etp {}; their "
             "states sharded over the expert data-parallel group of {} (tp*cp*dp / (ep*etp) = {}*{}*{} / ({}*{})), "
             "the rest over dp*cp = {}\n",
             s.model.moe.num_experts / p.moe.ep, s.model.moe.num_experts, p.moe.ep, p.moe.etp, r.expert_data_parallel,
             p.tp, p.cp, p.dp, p.moe.ep, p.moe.etp, p.grad_replicas());
  const bool dense_layers = s.model.num_moe_layers() < s.model.num_layers;
  fmt::print("moe      an MoE layer stores {} per micro-batch{}; \"expert st.\" is the experts' part of weights, "
             "grads and optimizer\n",
             gib(r.moe_layer_activations.total()),
             dense_layers ? fmt::format(" (a dense layer {})", gib(r.layer_activations.total())) : "");
}

void print_report(const Scenario& s, const MemoryReport& r) {
  const StepFlops flops = step_flops(s.model, s.plan);
  fmt::print("model    {} ({} parameters{}), seq {}, {}\n", s.model.name,
             count(static_cast<double>(total_params(s.model))), active_parameters(s.model), s.model.seq_length,
             to_string(s.plan.dtype));
  fmt::print("plan     {}\n", plan_summary(s.plan));
  fmt::print("cluster  {}: {} nodes x {} GPUs = {} x {} ({})\n", s.cluster.name, s.cluster.nodes,
             s.cluster.gpus_per_node, s.cluster.num_gpus(), s.profile.device.name, s.profile.name);
  fmt::print("flops    {:.3e} model FLOPs per step, {:.3e} with recompute{}\n\n", flops.model_flops,
             flops.hardware_flops, s.model.is_moe() ? " (active parameters: topk experts per token)" : "");
  if (r.moe) {
    print_moe_stages(s, r);
  } else {
    fmt::print("{:>5} {:>6} {:>10} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}  {}\n", "stage",
               "layers", "params", "weights", "grads", "optimizer", "activation", "buffers",
               "reserve", "total", "");
    for (const StageMemory& st : r.stages) {
      fmt::print("{:>5} {:>6} {:>10} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}  {}\n",
                 st.stage, st.layers, count(static_cast<double>(st.params)), gib(st.params_bytes),
                 gib(st.grads_bytes), gib(st.optimizer_bytes), gib(st.activations_bytes),
                 gib(st.buffers_bytes), gib(st.reserve_bytes), gib(st.total_bytes),
                 st.fits ? "fits" : "DOES NOT FIT");
    }
  }
  fmt::print("\ncapacity {} per GPU ({})\n", gib(r.capacity_bytes), s.profile.device.name);
  if (splits_backward(s.plan.schedule)) {
    // What the split backward costs in memory, stage by stage.
    std::string held;
    for (const StageMemory& st : r.stages) {
      held += fmt::format("{}{} full + {} W-only", held.empty() ? "" : "; ",
                          st.layer_microbatches_in_flight / std::max(1, st.layers), gib(st.weight_grad_bytes));
    }
    fmt::print("{}    micro-batches held per stage at its peak: {}\n", to_string(s.plan.schedule), held);
  }
  if (r.host_bytes_per_gpu > 0) {
    fmt::print("host     {} per GPU for the offloaded optimizer, {} per node\n",
               gib(r.host_bytes_per_gpu), gib(r.host_bytes_per_gpu * s.cluster.gpus_per_node));
  }
  const double headroom = 1.0 - r.peak_bytes / r.capacity_bytes;
  if (r.fits) {
    fmt::print("verdict  FITS: peak {} on stage {}, {:.1f}% headroom\n", gib(r.peak_bytes),
               r.peak_stage, 100.0 * headroom);
  } else {
    fmt::print("verdict  DOES NOT FIT: peak {} on stage {} exceeds {} by {}\n", gib(r.peak_bytes),
               r.peak_stage, gib(r.capacity_bytes), gib(r.peak_bytes - r.capacity_bytes));
  }
}

void run_memory(const MemoryArgs& args) {
  Scenario s = load_scenario(args.scenario);
  MemoryReport report = memory_report(s.model, s.plan, device_memory(s.profile));
  if (!args.json_file.empty()) {
    nlohmann::ordered_json j;
    j["inputs"] = inputs_json(s);
    j["memory"] = to_json(report);
    write_file_atomic(args.json_file, j.dump(2) + "\n");
  }
  print_report(s, report);
}

}  // namespace

void add_memory_command(CLI::App& app) {
  auto args = std::make_shared<MemoryArgs>();
  CLI::App* cmd = app.add_subcommand(
      "memory", "Per-GPU memory for each pipeline stage (weights, gradients, optimizer, "
                "activations, buffers) and whether the plan fits");
  add_scenario_options(*cmd, args->scenario);
  cmd->add_option("--json", args->json_file, "also write the breakdown as JSON to this file");
  cmd->callback([args] { run_memory(*args); });
}

}  // namespace strata::cli
