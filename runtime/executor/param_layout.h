// Which parameters one rank holds under a plan, where each sits in the flat
// buffers that data parallelism reduces and ZeRO shards, and which global
// elements it is (so every shard is initialized to match the whole model, and
// tests can reassemble the whole model from the shards).
//
// Storage, as Megatron-LM lays its layers out:
//   column-parallel weights (QKV, fc1, output layer, word embeddings) are
//     [out, in], split over tp by output rows: QKV keeps [Q | K | V] blocks of
//     heads and query groups, a SwiGLU fc1 keeps [a | b] halves;
//   row-parallel weights (projection, fc2) are [in, out], split over tp by input rows;
//   norms, row-parallel biases and learned positions are replicated on every tp rank.
// Every local row is a contiguous run of global rows (ParamSpec::pieces), so a
// shard is filled with fill_random at its global element offsets.
//
// Units and buckets: a unit is the parameters of one block (a transformer layer,
// the word embedding, the learned positions, the final norm, the output layer);
// its flat layout puts replicated parameters last. A bucket is the units of one of
// the plan's gradient buckets (plan/bucket_plan.h, the rule the simulator costs):
// units of one model chunk in backward order whose gradients are reduced together.
//
// Mixture of experts: an MoE layer is two units, its dense part (attention,
// norms, the router [num_experts, h], which every tensor-parallel rank holds
// whole, and the shared experts, one tensor-parallel MLP of their width
// "shared_fc1" / "shared_fc2") and its routed experts (kExperts: this expert-parallel rank's
// num_experts / ep experts, each its own fc1 and fc2, named by their global
// expert index). A planned bucket with experts becomes two buckets: the dense
// units, reduced over the data-parallel replicas, and the expert units, reduced
// over the expert data-parallel group (Megatron-Core's separate expert buffers).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/model_spec.h"
#include "plan/plan_spec.h"
#include "runtime/device/device.h"

namespace strata::rt {

enum class ParamInit {
  kUniform,  // uniform in [-init_range, init_range): the weights' init std times sqrt(3)
  kOnes,     // norm weights
  kZeros,    // biases
};

struct ParamSpec {
  // A run of local rows holding global rows [global_row, global_row + rows).
  struct Piece {
    std::int64_t local_row = 0;
    std::int64_t global_row = 0;
    std::int64_t rows = 0;
  };
  std::string name;               // global name, "layers.3.qkv.weight"
  std::int64_t rows = 0;          // local rows
  std::int64_t cols = 1;          // columns (1 for vectors); the same globally
  std::int64_t global_rows = 0;
  std::vector<Piece> pieces;
  ParamInit init = ParamInit::kUniform;
  float init_range = 0.0f;
  bool replicated = false;        // the same on every tp rank
  bool tied_copy = false;         // the last stage's copy of the tied word embedding
  std::int64_t offset = 0;        // in the unit's flat layout
  std::int64_t numel() const { return rows * cols; }
};

enum class UnitKind { kWordEmbedding, kPositionEmbedding, kLayer, kFinalNorm, kOutputLayer, kExperts };
const char* to_string(UnitKind kind);

// Roles of a transformer layer's parameters (index into Unit::role_index).
enum class LayerRole {
  kQkvWeight, kQkvBias, kProjWeight, kFc1Weight, kFc1Bias, kFc2Weight,
  kNorm1Weight, kNorm1Bias, kProjBias, kNorm2Weight, kNorm2Bias, kFc2Bias, kRouterWeight,
  kSharedFc1Weight, kSharedFc1Bias, kSharedFc2Weight, kSharedFc2Bias, kCount
};

struct Unit {
  UnitKind kind = UnitKind::kLayer;
  int chunk = 0;           // model chunk on this rank
  int local_layer = -1;    // layer index within the chunk (kLayer, kExperts)
  int layer = -1;          // global layer index (kLayer, kExperts)
  // kExperts: the global index of its first expert; its params are each local
  // expert's fc1.weight, fc1.bias, fc2.weight, fc2.bias (biases with add_bias_linear).
  int first_expert = 0;
  int experts = 0;
  std::vector<ParamSpec> params;
  std::int64_t numel = 0;
  std::int64_t replicated_begin = 0;  // params at [replicated_begin, numel) are replicated
  // kLayer: role -> index into params, -1 when the model has no such parameter.
  std::vector<int> role_index;
  int bucket = -1;
  std::int64_t bucket_offset = 0;     // where the unit starts in its bucket
  bool shared_embedding = false;      // the tied word embedding or its copy, pp > 1
};

struct Bucket {
  int chunk = 0;
  std::vector<int> units;       // in backward order (the order their gradients finish)
  std::int64_t numel = 0;       // sum of the units
  std::int64_t padded_numel = 0;  // a multiple of dp, so the ZeRO shards are equal
  bool embedding_sync = false;  // holds the tied word embedding or its copy, pp > 1
  bool expert = false;          // routed experts: reduced and sharded over the expert data-parallel group
  std::int64_t shard_numel(int dp) const { return padded_numel / dp; }
};

struct ParamLayout {
  std::vector<Unit> units;
  std::vector<Bucket> buckets;  // in the order their gradients become final
  // Units by position: [chunk][local layer], and the per-chunk block units (-1: none).
  std::vector<std::vector<int>> layer_units;
  std::vector<std::vector<int>> expert_units;  // [chunk][local layer]: the MoE layer's experts, -1 for a dense layer
  std::vector<int> word_embedding_unit;
  std::vector<int> position_embedding_unit;
  std::vector<int> final_norm_unit;
  std::vector<int> output_unit;  // untied output layer or the tied copy; -1 tied with pp == 1 or zb-v (chunk 0's word embedding)

  std::int64_t total_numel() const;
};

// The layout of rank (tp_rank, pp_rank), its buckets holding the plan's
// ddp_bucket_size; ep_rank: its place in the expert-parallel group (MoE models).
// Requires a checked plan (dp resolved, vocab_size divisible by tp, MoE keys
// resolved with etp 1); InternalError otherwise.
ParamLayout make_param_layout(const ModelSpec& model, const PlanSpec& plan, int tp_rank, int pp_rank,
                              int ep_rank = 0);

// One routed expert's weights (or gradients) in its kExperts unit's flat buffer.
struct ExpertView {
  TensorView fc1_weight, fc1_bias, fc2_weight, fc2_bias;  // fc1 [fc1 rows, h], fc2 [f, h]; biases may be empty
};
ExpertView expert_view(const Unit& experts, const TensorView& flat, int local_expert);

// Every parameter of the whole model (tp = pp = 1) with its global element
// count, in a fixed order: the layout tests reassemble shards into.
std::vector<std::pair<std::string, std::int64_t>> global_parameter_sizes(const ModelSpec& model);

}  // namespace strata::rt
