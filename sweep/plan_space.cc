#include "sweep/plan_space.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "costmodel/framework_profile.h"
#include "sim/scenario.h"

namespace strata::sim {
namespace {

std::vector<int> divisors(int n) {
  std::vector<int> d;
  for (int i = 1; i <= n; ++i) {
    if (n % i == 0) d.push_back(i);
  }
  return d;
}

// The candidate values of a free-standing option: the constraint's list when it
// pins the key to values, else the default.
template <typename T, typename Parse>
std::vector<T> option_values(const std::vector<Constraint>& cs, const std::string& key, T fallback,
                             Parse parse) {
  for (const Constraint& c : cs) {
    if (c.key == key && c.kind == Constraint::Kind::kOneOf) {
      std::vector<T> out;
      for (const std::string& v : c.allowed) out.push_back(parse(v));
      return out;
    }
  }
  return {fallback};
}

// How a plan splits the GPUs: tp x cp x pp x dp.
struct Grid {
  int tp, cp, pp, dp;
};

// Every split the model and the cluster allow, in (tp, cp, pp) order.
std::vector<Grid> grids(const ModelSpec& m, const ClusterSpec& cluster, const PlanSpaceRequest& req) {
  const int gpus = cluster.num_gpus();
  const int per_node = cluster.gpus_per_node;
  const bool cp_constrained = std::any_of(req.constraints.begin(), req.constraints.end(),
                                          [](const Constraint& c) { return c.key == "cp"; });
  std::vector<Grid> out;
  for (int tp : divisors(gpus)) {
    if (tp > per_node && !req.allow_cross_node_tp) continue;
    if (m.num_attention_heads % tp != 0 || m.num_query_groups % tp != 0 || m.ffn_hidden_size % tp != 0) continue;
    if (tp <= per_node ? per_node % tp != 0 : tp % per_node != 0) continue;
    // Context parallelism cuts every sequence into 2 cp load-balanced causal
    // chunks (Megatron-Core's attention), so seq_length must divide by 2 cp.
    for (int cp : divisors(gpus / tp)) {
      if (cp > 1 && m.seq_length % (2 * cp) != 0) continue;
      if (cp > 1 && !cp_constrained && m.seq_length / cp < req.min_cp_tokens) continue;
      for (int pp : divisors(gpus / (tp * cp))) {
        if (m.num_layers % pp != 0) continue;
        out.push_back({tp, cp, pp, gpus / (tp * cp * pp)});
      }
    }
  }
  return out;
}

}  // namespace

std::string stage_split_label(const PlanSpec& p) {
  if (!p.uneven_stages()) return "";
  if (p.account_for_embedding || p.account_for_loss) {
    return std::string(p.account_for_embedding ? "+emb" : "") + (p.account_for_loss ? "+loss" : "");
  }
  return fmt::format("{}/{}", p.first_stage_layers, p.last_stage_layers);
}

std::string plan_label(const PlanSpec& p) {
  // cp appears only where the plan has it, so cp = 1 labels (and their order) stay as they were.
  const std::string cp = p.cp > 1 ? fmt::format(" cp{}{}", p.cp, p.cp_comm_type == CpCommType::kP2p
                                                                    ? ""
                                                                    : std::string("-") + to_string(p.cp_comm_type))
                                  : "";
  // Hybrid sharding's shard group after the stage: "z3/8".
  const std::string zero = p.zero_shard_size > 0 ? fmt::format("{}/{}", p.zero_stage, p.zero_shard_size)
                                                 : std::to_string(p.zero_stage);
  // Uneven stages after pp: "pp4[17/15]".
  const std::string stages = stage_split_label(p);
  const std::string split = stages.empty() ? "" : "[" + stages + "]";
  // What the sweep varies only on request comes last, only when it differs from
  // the default: the precision and the overlaps turned off.
  std::string rest;
  if (p.dtype != DType::kBf16) rest += std::string(" ") + to_string(p.dtype);
  if (!p.overlap_grad_reduce) rest += " no-overlap-grad";
  if (!p.overlap_param_gather) rest += " no-overlap-param";
  // An MoE plan's expert parallelism after cp: "ep8 etp1".
  const std::string ep = p.moe.active ? fmt::format(" ep{} etp{}", p.moe.ep, p.moe.etp) : "";
  return fmt::format("tp{}{}{} pp{}{} dp{} vpp{} mbs{} {} z{}{} {}{}{}{}", p.tp, cp, ep, p.pp, split, p.dp, p.vpp,
                     p.micro_batch_size, to_string(p.schedule), zero,
                     p.offload_optimizer ? "+offload" : "", recompute_label(p),
                     p.sequence_parallel ? " sp" : "", p.flash_attention ? " flash" : "", rest);
}

std::vector<PlanSpec> enumerate_plans(const ModelSpec& m, const ClusterSpec& cluster,
                                      const PlanSpaceRequest& req, PlanSpaceCounts& counts) {
  const int gpus = cluster.num_gpus();
  const auto& sharded = framework_profile(req.framework).sharded;
  const bool framework_shards = sharded.has_value();
  // DeepSpeed's per-module ZeRO-3 does not run with pipeline parallelism (the
  // scenario refuses it).
  const bool zero3_needs_one_stage = sharded && sharded->module_gather.has_value();
  auto parse_bool = [](const std::string& v) { return v == "true"; };
  const std::vector<bool> flash = option_values<bool>(req.constraints, "flash_attention", req.flash_attention, parse_bool);
  const std::vector<bool> overlap_grad = option_values<bool>(req.constraints, "overlap_grad_reduce", true, parse_bool);
  const std::vector<bool> overlap_param = option_values<bool>(req.constraints, "overlap_param_gather", true, parse_bool);
  const std::vector<DType> dtypes = option_values<DType>(req.constraints, "dtype", req.dtype,
                                                         [](const std::string& v) { return *parse_dtype(v); });
  // read_constraints allowed only cp_comm_type_names(): every value parses.
  const std::vector<CpCommType> cp_comm_types = option_values<CpCommType>(
      req.constraints, "cp_comm_type", CpCommType::kP2p, [](const std::string& v) { return *parse_cp_comm_type(v); });
  // Hybrid sharding is tried only where a constraint lists shard sizes (0: all replicas).
  const std::vector<int> shard_sizes =
      option_values<int>(req.constraints, "zero_shard_size", 0, [](const std::string& v) { return std::stoi(v); });
  // Recompute settings: none, Megatron's selective (the attention core), full;
  // a multi-head latent attention model also selective of its up-projections
  // (recompute module mla_up_proj, NeMo's DeepSeek-V3 recipes' choice).
  std::vector<std::pair<Recompute, RecomputeModules>> recompute_options = {
      {Recompute::kNone, {}}, {Recompute::kSelective, {}}, {Recompute::kFull, {}}};
  if (m.mla.enabled) recompute_options.push_back({Recompute::kSelective, RecomputeModules{false, true}});
  PlanContext context{gpus, cluster.gpus_per_node, req.allow_cross_node_tp};
  // An MoE model's expert layouts of a grid: ep dividing num_experts and the
  // stage's ranks, etp 1 (MoE Parallel Folding's choice) or tp (Megatron-Core's
  // default); one (ep 1, etp unset) for a dense model.
  auto expert_layouts = [&](const Grid& g) {
    std::vector<std::pair<int, int>> out;
    if (!m.is_moe()) return std::vector<std::pair<int, int>>{{1, 0}};
    for (int ep : divisors(m.moe.num_experts)) {
      for (int etp : {1, g.tp}) {
        if ((g.tp * g.cp * g.dp) % (ep * etp) != 0) continue;
        if (std::find(out.begin(), out.end(), std::make_pair(ep, etp)) == out.end()) out.emplace_back(ep, etp);
      }
    }
    return out;
  };

  std::vector<PlanSpec> plans;
  for (const Grid& g : grids(m, cluster, req)) {
    std::vector<int> vpps = {1};
    if (g.pp > 1) {
      for (int v : divisors(m.num_layers / g.pp)) {
        if (v > 1 && v <= req.max_vpp) vpps.push_back(v);
      }
    }
    // Only a fused attention kernel shards over cp (resolve_and_check_plan), and
    // without cp there is no exchange to choose.
    std::vector<bool> grid_flash;
    for (bool fa : flash) {
      if (g.cp == 1 || fa) grid_flash.push_back(fa);
    }
    const std::vector<CpCommType> grid_cp_comm =
        g.cp > 1 ? cp_comm_types : std::vector<CpCommType>{CpCommType::kP2p};
    for (int vpp : vpps) {
      for (int mbs = 1; mbs <= req.max_micro_batch_size; mbs *= 2) {
        if (req.global_batch_size % (mbs * g.dp) != 0) continue;
        const int microbatches = req.global_batch_size / (mbs * g.dp);
        std::vector<Schedule> schedules;
        if (vpp > 1) {
          // Megatron-LM's interleaving needs m divisible by pp; zb-v's V runs
          // exactly two chunks per rank, any m.
          if (microbatches % g.pp == 0) schedules.push_back(Schedule::kInterleaved);
          if (vpp == 2) schedules.push_back(Schedule::kZbV);
        } else {
          schedules = {Schedule::kOneFOneB, Schedule::kGpipe};
          // The zero-bubble schedules fill a pipeline's bubbles (ZeRO-3 excluded
          // below: resolve_and_check_plan refuses it).
          if (g.pp > 1) schedules.insert(schedules.end(), {Schedule::kZbH1, Schedule::kZbH2});
        }
        for (Schedule schedule : schedules) {
          // ZeRO with a single replica (dp x cp) shards nothing: only stage 0.
          const bool zero3 = framework_shards && !splits_backward(schedule) && (g.pp == 1 || !zero3_needs_one_stage);
          const int max_zero = g.dp * g.cp > 1 ? (zero3 ? 3 : 2) : 0;
          for (int zero = 0; zero <= max_zero; ++zero) {
            // Shard sizes of this grid: those that split its dp x cp replicas into
            // groups (one group of all is the plain plan, 0), with ZeRO only.
            std::vector<int> shards;
            for (int z : shard_sizes) {
              const int replicas = g.dp * g.cp;
              const int shard = zero == 0 || z == 0 || z >= replicas || replicas % z != 0 ? 0 : z;
              if (std::find(shards.begin(), shards.end(), shard) == shards.end()) shards.push_back(shard);
            }
            for (int shard : shards) {
              for (bool offload : {false, true}) {
                if (offload && zero == 0) continue;
                for (const auto& [recompute, modules] : recompute_options) {
                  for (bool sp : {false, true}) {
                    if (sp && g.tp == 1) continue;
                    for (bool fa : grid_flash) {
                      for (CpCommType cp_comm : grid_cp_comm) {
                        for (bool og : overlap_grad) {
                          for (bool opg : overlap_param) {
                            for (DType dtype : dtypes) {
                              for (const auto& [ep, etp] : expert_layouts(g)) {
                                ++counts.candidates;
                                PlanSpec p;
                                if (m.is_moe()) {
                                  p.moe.ep = ep;
                                  p.moe.etp = etp;
                                  // The request's dispatcher (the all-to-all by default) and
                                  // grouped GEMMs: what Megatron-Core's MoE recipes run with ep > 1.
                                  p.moe.token_dispatcher = req.moe_dispatcher;
                                  p.moe.grouped_gemm = true;
                                  // Shared experts beside the token exchanges where the dispatcher
                                  // has them (NeMo's DeepSeek-V3 and Llama 4 recipes): no memory,
                                  // only hidden time.
                                  p.moe.shared_expert_overlap = m.moe.moe_shared_expert_intermediate_size > 0 &&
                                                                req.moe_dispatcher != MoeDispatcher::kAllGather;
                                }
                                p.tp = g.tp;
                                p.cp = g.cp;
                                p.cp_comm_type = cp_comm;
                                p.pp = g.pp;
                                p.dp = g.dp;
                                p.vpp = vpp;
                                p.micro_batch_size = mbs;
                                p.global_batch_size = req.global_batch_size;
                                p.schedule = schedule;
                                p.zero_stage = zero;
                                p.zero_shard_size = shard;
                                p.offload_optimizer = offload;
                                p.recompute = recompute;
                                p.recompute_modules = modules;
                                p.sequence_parallel = sp;
                                p.flash_attention = fa;
                                p.overlap_grad_reduce = og;
                                p.overlap_param_gather = opg;
                                p.dtype = dtype;
                                p.framework = req.framework;
                                // Megatron-LM accumulates and reduces bf16 gradients in fp32
                                // (arguments.py), as plan.json's default does.
                                p.accumulate_allreduce_grads_in_fp32 = dtype == DType::kBf16;
                                if (!satisfies(p, req.constraints)) {
                                  ++counts.constrained;
                                  continue;
                                }
                                try {
                                  resolve_and_check_plan(p, m, context, "(sweep)");
                                } catch (const InputError&) {
                                  ++counts.invalid;
                                  continue;
                                }
                                // A plan the simulator does not model (an MoE plan's ZeRO-3).
                                if (simulation_refusal(m, p, "(sweep)")) {
                                  ++counts.invalid;
                                  continue;
                                }
                                plans.push_back(p);
                              }
                            }
                          }
                        }
                      }
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  return plans;
}

}  // namespace strata::sim
