#include "runtime/executor/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace strata::rt {
namespace {

using i64 = std::int64_t;

// Softmax of one row of n logits, in double.
std::vector<double> softmax_row(const float* x, int n) {
  double top = x[0];
  for (int i = 1; i < n; ++i) top = std::max(top, static_cast<double>(x[i]));
  std::vector<double> p(static_cast<std::size_t>(n));
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += p[i] = std::exp(static_cast<double>(x[i]) - top);
  for (double& v : p) v /= sum;
  return p;
}

}  // namespace

Routing route_tokens(const std::vector<float>& logits, i64 tokens, int experts, int topk, double capacity_factor) {
  if (experts < 1 || topk < 1 || topk > experts || static_cast<i64>(logits.size()) != tokens * experts) {
    throw InternalError("route_tokens: logits are not [tokens, experts] or top-k is not in [1, experts]");
  }
  Routing r;
  r.tokens = tokens;
  r.experts = experts;
  r.topk = topk;
  const std::size_t copies = static_cast<std::size_t>(tokens * topk);
  r.expert.resize(copies);
  r.gate.resize(copies);
  r.slot.assign(copies, -1);
  r.chosen_per_expert.assign(static_cast<std::size_t>(experts), 0);
  std::vector<int> order(static_cast<std::size_t>(experts));
  std::vector<float> chosen(static_cast<std::size_t>(topk));
  for (i64 t = 0; t < tokens; ++t) {
    const float* row = logits.data() + t * experts;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + topk, order.end(),
                      [&](int a, int b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
    for (int j = 0; j < topk; ++j) chosen[j] = row[order[j]];
    const std::vector<double> g = softmax_row(chosen.data(), topk);
    for (int j = 0; j < topk; ++j) {
      r.expert[t * topk + j] = order[j];
      r.gate[t * topk + j] = static_cast<float>(g[j]);
      ++r.chosen_per_expert[order[j]];
    }
  }
  // Each expert's copies in token order; with a capacity, the highest gates'.
  std::vector<std::vector<i64>> copies_of(static_cast<std::size_t>(experts));
  for (std::size_t c = 0; c < copies; ++c) copies_of[r.expert[c]].push_back(static_cast<i64>(c));
  if (capacity_factor > 0.0) {
    const i64 capacity = static_cast<i64>(std::ceil(static_cast<double>(tokens * topk) / experts * capacity_factor));
    for (std::vector<i64>& list : copies_of) {
      if (static_cast<i64>(list.size()) <= capacity) continue;
      std::stable_sort(list.begin(), list.end(), [&](i64 a, i64 b) { return r.gate[a] > r.gate[b]; });
      list.resize(static_cast<std::size_t>(capacity));
      std::sort(list.begin(), list.end());
    }
  }
  r.per_expert.assign(static_cast<std::size_t>(experts), 0);
  for (int e = 0; e < experts; ++e) {
    for (const i64 c : copies_of[e]) {
      r.slot[c] = static_cast<std::int32_t>(r.row_token.size());
      r.row_token.push_back(static_cast<std::int32_t>(c / topk));
      r.row_gate.push_back(r.gate[c]);
    }
    r.per_expert[e] = static_cast<i64>(copies_of[e].size());
  }
  return r;
}

double load_balancing_loss(const Routing& r, const std::vector<float>& logits, double coeff) {
  std::vector<double> prob_sum(static_cast<std::size_t>(r.experts), 0.0);
  for (i64 t = 0; t < r.tokens; ++t) {
    const std::vector<double> p = softmax_row(logits.data() + t * r.experts, r.experts);
    for (int e = 0; e < r.experts; ++e) prob_sum[e] += p[e];
  }
  double sum = 0.0;
  for (int e = 0; e < r.experts; ++e) sum += prob_sum[e] * static_cast<double>(r.chosen_per_expert[e]);
  const double t = static_cast<double>(r.tokens);
  return coeff * r.experts / (t * t * r.topk) * sum;
}

BalanceCounts own_balance_counts(const Routing& r) { return {r.chosen_per_expert, static_cast<double>(r.tokens)}; }

std::vector<float> router_logit_grads(const Routing& r, const std::vector<float>& logits,
                                      const std::vector<float>& gate_grad, double coeff, double aux_scale) {
  return router_logit_grads(r, logits, gate_grad, coeff, aux_scale, own_balance_counts(r));
}

std::vector<float> router_logit_grads(const Routing& r, const std::vector<float>& logits,
                                      const std::vector<float>& gate_grad, double coeff, double aux_scale,
                                      const BalanceCounts& counts) {
  const int E = r.experts;
  const int k = r.topk;
  std::vector<float> out(static_cast<std::size_t>(r.tokens * E), 0.0f);
  // d aux / d p_te = coeff * E / (T^2 k) * (copies routed to e): the same for every token.
  std::vector<double> aux_grad(static_cast<std::size_t>(E), 0.0);
  const bool aux = coeff > 0.0 && aux_scale != 0.0;
  if (aux) {
    if (static_cast<int>(counts.chosen_per_expert.size()) != E || !(counts.tokens > 0.0)) {
      throw InternalError("router_logit_grads: the balance counts are not one per expert over some tokens");
    }
    const double t = counts.tokens;
    for (int e = 0; e < E; ++e) {
      aux_grad[e] = aux_scale * coeff * E / (t * t * k) * static_cast<double>(counts.chosen_per_expert[e]);
    }
  }
  for (i64 t = 0; t < r.tokens; ++t) {
    float* d = out.data() + t * E;
    // Top-k softmax: d logit_j = g_j (dg_j - sum_i g_i dg_i) over the chosen.
    double dot = 0.0;
    for (int j = 0; j < k; ++j) dot += static_cast<double>(r.gate[t * k + j]) * gate_grad[t * k + j];
    for (int j = 0; j < k; ++j) {
      const double g = r.gate[t * k + j];
      d[r.expert[t * k + j]] += static_cast<float>(g * (gate_grad[t * k + j] - dot));
    }
    if (!aux) continue;
    // The softmax over every expert: d logit_e = p_e (a_e - sum_i p_i a_i).
    const std::vector<double> p = softmax_row(logits.data() + t * E, E);
    double pa = 0.0;
    for (int e = 0; e < E; ++e) pa += p[e] * aux_grad[e];
    for (int e = 0; e < E; ++e) d[e] += static_cast<float>(p[e] * (aux_grad[e] - pa));
  }
  return out;
}

}  // namespace strata::rt
