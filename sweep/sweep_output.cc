#include "sweep/sweep_output.h"

#include <algorithm>

#include <fmt/format.h>

#include "plan/moe_spec.h"

namespace strata::sim {
namespace {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

const char* tf(bool b) { return b ? "true" : "false"; }

// Numbers with 6 significant digits: enough for any decision, stable across runs.
std::string num(double x) { return fmt::format("{:.6g}", x); }
// Byte counts as whole numbers, as sweep.json has them to the byte.
std::string bytes(double x) { return fmt::format("{:.0f}", x); }

nlohmann::ordered_json outcome_json(const PlanOutcome& o) {
  nlohmann::ordered_json j;
  j["rank"] = o.rank;
  j["label"] = o.label;
  j["plan"] = to_json(o.plan);
  j["fits"] = o.fits;
  j["pareto"] = o.pareto;
  nlohmann::ordered_json r;
  r["fidelity"] = o.fidelity;
  r["step_time_s"] = o.step_time_s;
  if (o.folded_step_time_s > 0) r["folded_step_time_s"] = o.folded_step_time_s;
  r["tokens_per_s"] = o.tokens_per_s;
  r["mfu"] = o.mfu;
  r["hfu"] = o.hfu;
  r["tflops_per_gpu"] = o.tflops_per_gpu;
  r["bubble_ratio"] = o.bubble_ratio;
  r["compute_s"] = o.compute_s;
  r["exposed_comm_s"] = {{"tp", o.exposed_s[0]}, {"pp", o.exposed_s[1]}, {"dp", o.exposed_s[2]},
                         {"zero", o.exposed_s[3]}, {"offload", o.exposed_s[4]}};
  if (o.plan.cp > 1) r["exposed_comm_s"]["cp"] = o.exposed_s[static_cast<int>(CommKind::kCp)];
  if (o.plan.moe.active) r["exposed_comm_s"]["ep"] = o.exposed_s[static_cast<int>(CommKind::kEp)];
  if (o.p90_step_time_s > 0.0) {
    // Sampled under clock variation (strata sweep --samples).
    r["p50_step_time_s"] = o.p50_step_time_s;
    r["p90_step_time_s"] = o.p90_step_time_s;
    r["p90_ci95"] = {o.p90_ci_low_s, o.p90_ci_high_s};
  }
  r["peak_bytes"] = o.peak_bytes;
  r["capacity_bytes"] = o.capacity_bytes;
  r["headroom"] = o.headroom();
  j["result"] = r;
  j["why"] = o.why;
  return j;
}

}  // namespace

std::string sweep_csv(const SweepResult& sweep) {
  std::string out;
  out +=
      "rank,tp,pp,dp,vpp,micro_batch_size,global_batch_size,schedule,zero_stage,offload_optimizer,"
      "recompute,sequence_parallel,fits,step_time_s,tokens_per_s,mfu,hfu,tflops_per_gpu,bubble_ratio,"
      "exposed_tp_s,exposed_pp_s,exposed_dp_s,exposed_zero_s,peak_bytes,capacity_bytes,headroom,pareto,"
      "fidelity,why,flash_attention,exposed_offload_s,compute_s,prune_reason,cp,cp_comm_type,exposed_cp_s,"
      "decoder_first_pipeline_num_layers,decoder_last_pipeline_num_layers,";
  out.append(kLaterPlanColumns);
  // An MoE model's plans also differ in their expert layout: its columns last
  // (a dense model's file is as it was).
  const bool moe = !sweep.plans.empty() && sweep.plans.front().plan.moe.active;
  if (moe) out += ",ep,etp,moe_token_dispatcher_type,exposed_ep_s";
  // A sampled sweep's plans re-simulated at full fidelity have their P50 and P90.
  const bool sampled = std::any_of(sweep.plans.begin(), sweep.plans.end(),
                                   [](const PlanOutcome& o) { return o.p90_step_time_s > 0.0; });
  if (sampled) out += ",p50_step_time_s,p90_step_time_s";
  out += '\n';
  for (const PlanOutcome& o : sweep.plans) {
    const PlanSpec& p = o.plan;
    out += o.rank > 0 ? std::to_string(o.rank) : "";
    out += fmt::format(",{},{},{},{},{},{},{},{},{},{},{},{}", p.tp, p.pp, p.dp, p.vpp, p.micro_batch_size,
                       p.global_batch_size, to_string(p.schedule), p.zero_stage, tf(p.offload_optimizer),
                       recompute_label(p), tf(p.sequence_parallel), tf(o.fits));
    if (o.simulated) {
      out += fmt::format(",{},{},{},{},{},{},{},{},{},{}", num(o.step_time_s), num(o.tokens_per_s), num(o.mfu),
                         num(o.hfu), num(o.tflops_per_gpu), num(o.bubble_ratio), num(o.exposed_s[0]),
                         num(o.exposed_s[1]), num(o.exposed_s[2]), num(o.exposed_s[3]));
    } else {
      out += ",,,,,,,,,,";
    }
    out += fmt::format(",{},{},{},{},{},{},{}", bytes(o.peak_bytes), bytes(o.capacity_bytes), num(o.headroom()),
                       tf(o.pareto), o.fidelity, csv_field(o.why), tf(p.flash_attention));
    out += o.simulated ? fmt::format(",{},{}", num(o.exposed_s[4]), num(o.compute_s)) : ",,";
    out += ',';
    out += csv_field(o.prune_reason);
    // Columns added after the first release go last, so readers by position keep working.
    out += fmt::format(",{},{},", p.cp, to_string(p.cp_comm_type));
    if (o.simulated) out += num(o.exposed_s[static_cast<int>(CommKind::kCp)]);
    // Uneven stages' layer counts, empty for the even split.
    out += ',' + (p.first_stage_layers > 0 ? std::to_string(p.first_stage_layers) : std::string());
    out += ',' + (p.last_stage_layers > 0 ? std::to_string(p.last_stage_layers) : std::string());
    // Every other plan field, so two rows never read alike (kLaterPlanColumns' order).
    out += fmt::format(",{},{},{},{},{},{},{},{},{},{}", p.zero_shard_size, tf(p.overlap_grad_reduce),
                       tf(p.overlap_param_gather), to_string(p.dtype), tf(p.accumulate_allreduce_grads_in_fp32),
                       csv_field(to_string(p.rank_order)), p.ddp_bucket_size, csv_field(p.framework),
                       tf(p.account_for_embedding), tf(p.account_for_loss));
    if (moe) {
      out += fmt::format(",{},{},{},", p.moe.ep, p.moe.etp, to_string(p.moe.token_dispatcher));
      if (o.simulated) out += num(o.exposed_s[static_cast<int>(CommKind::kEp)]);
    }
    if (sampled) {
      out += o.p90_step_time_s > 0.0 ? fmt::format(",{},{}", num(o.p50_step_time_s), num(o.p90_step_time_s)) : ",,";
    }
    out += '\n';
  }
  return out;
}

nlohmann::ordered_json sweep_request_json(const std::string& model_name, const std::string& cluster_name,
                                          const std::string& profile_name, const ModelSpec& model,
                                          const ClusterSpec& cluster, const PlanSpaceRequest& request) {
  nlohmann::ordered_json r;
  r["model"] = model_name;
  r["cluster"] = cluster_name;
  r["profile"] = profile_name.empty() ? cluster.profile : profile_name;
  r["global_batch_size"] = request.global_batch_size;
  r["seq_length"] = model.seq_length;
  r["dtype"] = to_string(request.dtype);
  r["framework"] = request.framework;
  r["allow_cross_node_tp"] = request.allow_cross_node_tp;
  r["min_cp_tokens"] = request.min_cp_tokens;
  if (model.is_moe()) r["moe_token_dispatcher_type"] = to_string(request.moe_dispatcher);
  r["constraints"] = to_json(request.constraints);
  r["model_spec"] = to_json(model);
  r["cluster_spec"] = to_json(cluster);
  return r;
}

nlohmann::ordered_json sweep_json(const SweepResult& sweep, const nlohmann::ordered_json& request) {
  nlohmann::ordered_json j;
  j["schema"] = "strata-sweep/1";
  j["request"] = request;
  nlohmann::ordered_json c;
  c["candidates"] = sweep.counts.space.candidates;
  c["constrained"] = sweep.counts.space.constrained;
  c["invalid"] = sweep.counts.space.invalid;
  c["enumerated"] = sweep.counts.valid;
  c["pruned_memory"] = sweep.counts.pruned_memory;
  nlohmann::ordered_json reasons = nlohmann::ordered_json::object();
  for (const auto& [reason, n] : sweep.counts.pruned_by_reason) reasons[reason] = n;
  c["pruned_by_reason"] = reasons;
  c["too_large"] = sweep.counts.too_large;
  c["simulated"] = sweep.counts.simulated;
  c["full_fidelity"] = sweep.counts.full_fidelity;
  c["balanced"] = sweep.counts.balanced;
  j["counts"] = c;
  nlohmann::ordered_json plans = nlohmann::ordered_json::array();
  for (const PlanOutcome& o : sweep.plans) {
    if (o.simulated) plans.push_back(outcome_json(o));
  }
  // Then every plan not simulated, with why (it does not fit, or its step is too
  // large to simulate) and its memory: what the counts count, as sweep.csv lists them.
  for (const PlanOutcome& o : sweep.plans) {
    if (o.simulated) continue;
    nlohmann::ordered_json e;
    e["label"] = o.label;
    e["plan"] = to_json(o.plan);
    e["fits"] = o.fits;
    e["prune_reason"] = o.prune_reason;
    e["peak_bytes"] = o.peak_bytes;
    e["capacity_bytes"] = o.capacity_bytes;
    e["headroom"] = o.headroom();
    plans.push_back(std::move(e));
  }
  j["plans"] = plans;
  return j;
}

}  // namespace strata::sim
