// An MoE layer's routing decisions on the host, as Megatron-Core's TopKRouter
// makes them (moe/router.py, moe/moe_utils.py topk_softmax_with_capacity), and
// their backward: which experts each token goes to, with what gate, in which
// order the tokens are laid out for the experts, and the gradient of the
// router's logits from the gates' gradient and the load-balancing loss.
//
//   top-k        each token's k largest logits (ties: the lower expert);
//   gates        softmax over those k logits (Megatron's default score function,
//                softmax after top-k: moe_router_pre_softmax false);
//   capacity     with a capacity factor, an expert takes at most
//                ceil(tokens * k / E * factor) tokens, those of the highest gates
//                (moe_token_drop_policy "probs"); a dropped slot's gate is 0;
//   order        the routed copies expert by expert, tokens in order within one
//                (moe_utils.py permute);
//   aux loss     Switch Transformer's load balancing (Fedus et al. 2021, eq. 4;
//                moe_utils.py switch_load_balancing_loss_func):
//                coeff * E / (T^2 k) * sum_e (tokens routed to e) * (sum_t p_te),
//                p the softmax over all experts, the counts before dropping.
//
// Logits are fp32 here whatever the training dtype: the decisions are exact
// functions of them, so every rank and plan routes a token alike.
#pragma once

#include <cstdint>
#include <vector>

namespace strata::rt {

struct Routing {
  std::int64_t tokens = 0;
  int experts = 0;
  int topk = 0;
  std::vector<std::int32_t> expert;     // [tokens * k]: the chosen experts, by descending logit
  std::vector<float> gate;              // [tokens * k]: softmax over the chosen logits (before dropping)
  std::vector<std::int32_t> slot;       // [tokens * k]: the copy's row in the permuted order, -1: dropped
  std::vector<std::int32_t> row_token;  // [routed]: the token of each permuted row
  std::vector<float> row_gate;          // [routed]: its gate
  std::vector<std::int64_t> per_expert;  // [E]: rows each expert takes (after dropping)
  std::vector<std::int64_t> chosen_per_expert;  // [E]: copies routed to each expert (before dropping)
  std::int64_t routed() const { return static_cast<std::int64_t>(row_token.size()); }
};

// logits: [tokens, experts] row-major. capacity_factor 0: dropless.
Routing route_tokens(const std::vector<float>& logits, std::int64_t tokens, int experts, int topk,
                     double capacity_factor);

// The switch load-balancing loss of one micro-batch's routing (unscaled by the
// schedule), for the record and the tests.
double load_balancing_loss(const Routing& r, const std::vector<float>& logits, double coeff);

// The load-balancing loss's view of the tokens: the copies routed to each
// expert and the tokens they came from. One rank's own, or with the sequence
// split over ranks (sequence parallelism, context parallelism) the sums over
// them, as Megatron-Core reduces tokens_per_expert over its tp x cp group: the
// loss of the whole sequence, each rank's share of its gradient from its own
// tokens' probabilities.
struct BalanceCounts {
  std::vector<std::int64_t> chosen_per_expert;
  double tokens = 0.0;
};
BalanceCounts own_balance_counts(const Routing& r);

// d loss / d logits [tokens, experts]: gate_grad [tokens * k] (d loss / d gate,
// 0 for dropped copies) through the top-k softmax, plus aux_scale times the
// load-balancing loss's gradient at `counts` (aux_scale 0: none).
std::vector<float> router_logit_grads(const Routing& r, const std::vector<float>& logits,
                                      const std::vector<float>& gate_grad, double coeff, double aux_scale,
                                      const BalanceCounts& counts);
// The same at this rank's own counts.
std::vector<float> router_logit_grads(const Routing& r, const std::vector<float>& logits,
                                      const std::vector<float>& gate_grad, double coeff, double aux_scale);

}  // namespace strata::rt
