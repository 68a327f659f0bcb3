// The GEMM and attention shapes a sweep over models will run: forward,
// data-gradient and weight-gradient GEMMs of every layer, the logits and the
// attention core, for each TP size and micro-batch size tried.
#pragma once

#include <vector>

#include "costmodel/cost_queries.h"
#include "plan/model_spec.h"

namespace strata::cli {

struct CalibrationShapes {
  std::vector<GemmQuery> gemms;
  std::vector<AttentionQuery> attention;
};

// TP sizes from {1, 2, 4, 8} that divide the model's heads, query groups and
// MLP width; micro-batch sizes as given. dtype: what the GEMMs run in.
CalibrationShapes model_shapes(const ModelSpec& model, const std::vector<int>& micro_batch_sizes,
                               DType dtype);

}  // namespace strata::cli
