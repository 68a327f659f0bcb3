#include "cli/calibrate_shapes.h"

#include "plan/layer_ops.h"

namespace strata::cli {

CalibrationShapes model_shapes(const ModelSpec& model, const std::vector<int>& micro_batch_sizes,
                               DType dtype) {
  CalibrationShapes out;
  for (int tp : {1, 2, 4, 8}) {
    if (model.num_attention_heads % tp != 0 || model.num_query_groups % tp != 0 ||
        model.ffn_hidden_size % tp != 0) {
      continue;
    }
    for (int mbs : micro_batch_sizes) {
      LayerOpContext c;
      c.tp = tp;
      c.micro_batch_size = mbs;
      c.flash_attention = true;
      c.dtype = dtype;
      std::vector<LayerOp> ops = layer_forward_ops(model, c);
      for (const LayerOp& op : head_forward_ops(model, c)) ops.push_back(op);
      // An MoE model's layers: the router, the shared experts, and the routed
      // experts as the grouped GEMM of each expert-parallel size (num_experts / ep
      // GEMMs of the balanced share of tokens; etp 1, dropless), as the
      // simulator costs them (plan/layer_ops.h).
      if (model.is_moe() && tp == 1) {
        for (int ep = 1; ep <= model.moe.num_experts; ep *= 2) {
          if (model.moe.num_experts % ep != 0) continue;
          LayerOpContext moe = c;
          moe.ep = ep;
          for (const LayerOp& op : layer_forward_ops(model, moe, MlpKind::kMoe)) {
            if (op.role == OpRole::kRouter || op.role == OpRole::kExpertFc1 || op.role == OpRole::kExpertFc2 ||
                (ep == 1 && (op.role == OpRole::kFc1 || op.role == OpRole::kFc2))) {
              ops.push_back(op);
            }
          }
        }
      }
      for (const LayerOp& op : ops) {
        if (op.kind == OpKind::kGemm) {
          const GemmShape& g = op.gemm;
          // Y[m,n] = X[m,k] W^T: forward; dX[m,k] = dY[m,n] W; dW[n,k] = dY^T X.
          out.gemms.push_back({g.m, g.n, g.k, g.batch, dtype});
          out.gemms.push_back({g.m, g.k, g.n, g.batch, dtype});
          out.gemms.push_back({g.n, g.k, g.m, g.batch, dtype});
        } else if (op.kind == OpKind::kAttention) {
          out.attention.push_back({op.attn_batch_heads, op.attn_seq, op.attn_head_dim, true, false, dtype});
        }
      }
    }
  }
  return out;
}

}  // namespace strata::cli
