// The sweep's files: sweep.csv (one row per valid plan, every plan key and metric
// its own column; loads into pandas or a spreadsheet as is) and sweep.json (the
// request, the counts, and the simulated plans with their results).
// Columns and keys are documented in docs/formats.md.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "sweep/sweep.h"

namespace strata::sim {

// What was asked, as sweep.json's "request" records it: the model, cluster and
// profile as the user named them (profile "": the cluster's), the plan-space
// request, and the specs the names resolved to.
nlohmann::ordered_json sweep_request_json(const std::string& model_name, const std::string& cluster_name,
                                          const std::string& profile_name, const ModelSpec& model,
                                          const ClusterSpec& cluster, const PlanSpaceRequest& request);

// sweep.csv's last columns: the plan fields the first columns do not have, named
// as plan.json names them (a test checks that every plan.json key has a column).
inline constexpr const char* kLaterPlanColumns =
    "zero_shard_size,overlap_grad_reduce,overlap_param_gather,dtype,accumulate_allreduce_grads_in_fp32,rank_order,"
    "ddp_bucket_size,framework,account_for_embedding_in_pipeline_split,account_for_loss_in_pipeline_split";

std::string sweep_csv(const SweepResult& sweep);
nlohmann::ordered_json sweep_json(const SweepResult& sweep, const nlohmann::ordered_json& request);

}  // namespace strata::sim
