#include "sim/workload/tp_overlap.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace strata::sim {
namespace {

// TE's name of the GEMM op `name` in `phase`: "qkv" forward is qkv_fprop,
// "fc2 dgrad" fc2_dgrad; the replay of full recompute is a forward.
std::string te_name(std::string name) {
  const std::string replay = "recompute ";
  if (name.rfind(replay, 0) == 0) name = name.substr(replay.size());
  const auto space = name.find(' ');
  if (space == std::string::npos) return name + "_fprop";
  return name.substr(0, space) + "_" + name.substr(space + 1);
}

}  // namespace

TpOverlap async_backward_overlap(const TpAsyncBackward& async) {
  TpOverlap t;
  TpOverlapGemm beside;
  beside.method = TpOverlapMethod::kNcclBeside;
  beside.num_sm = async.num_sm;
  // Every column-parallel layer: MLA's up-projections are TE's too.
  for (const char* layer : {"qkv", "fc1", "logits", "q_up", "kv_up", "q_proj"}) {
    t.gemms[std::string(layer) + "_dgrad"] = beside;
    t.gemms[std::string(layer) + "_wgrad"] = beside;
  }
  t.source = async.source;
  return t;
}

TimeNs overlapped_ns(const TpOverlapGemm& g, TimeNs gemm_ns, TimeNs comm_ns, int tp, int units,
                     int comm_channels) {
  if (g.method == TpOverlapMethod::kNcclBeside) {
    const int sms = g.num_sm > 0 ? g.num_sm : comm_channels;
    const double held = units > 0 ? std::min(1.0, static_cast<double>(sms) / units) : 0.0;
    const double t = std::max(static_cast<double>(comm_ns), static_cast<double>(gemm_ns) + comm_ns * held);
    return static_cast<TimeNs>(std::llround(t));
  }
  double gemm = static_cast<double>(gemm_ns);
  if (units > g.num_sm && g.num_sm > 0) gemm *= static_cast<double>(units) / (units - g.num_sm);
  const double comm = static_cast<double>(comm_ns);
  const double hi = std::max(gemm, comm), lo = std::min(gemm, comm);
  double t = hi;
  switch (g.method) {
    case TpOverlapMethod::kRingExchange: t = hi + lo / tp; break;
    case TpOverlapMethod::kPipeline: t = hi + lo / g.num_splits; break;
    case TpOverlapMethod::kBulk: t = hi; break;
    case TpOverlapMethod::kNcclBeside: break;  // above
  }
  return static_cast<TimeNs>(std::llround(t));
}

void overlap_tp_collectives(std::vector<Segment>& segs, const TpOverlap& overlap, int tp, int units,
                            const TpCommTime& comm_ns) {
  std::size_t k = 0;
  while (k < segs.size()) {
    // Only the tensor-parallel collectives: a context-parallel exchange or an MoE
    // layer's token exchange beside a GEMM is not Transformer Engine's to overlap
    // (and is costed on another group).
    if (!segs[k].is_comm || segs[k].group != CommGroup::kTensor) {
      ++k;
      continue;
    }
    // An all-gather feeds the GEMM after it; a reduce-scatter reduces the
    // output of the GEMM before it (the weight-gradient GEMM in the backward).
    const bool gathers = segs[k].op == CollectiveOp::kAllGather;
    const bool has_neighbour = gathers ? k + 1 < segs.size() : k > 0;
    const std::size_t at = gathers ? k + 1 : k - 1;
    if (!has_neighbour || segs[at].is_comm || segs[at].ops.empty()) {
      ++k;
      continue;
    }
    DetailOp& gemm = gathers ? segs[at].ops.front() : segs[at].ops.back();
    auto it = overlap.gemms.find(te_name(gemm.name));
    if (gemm.category != Category::kGemm || it == overlap.gemms.end()) {
      ++k;
      continue;
    }
    const TpComm comm = comm_ns(segs[k].op, segs[k].comm_bytes);
    gemm.duration_ns = overlapped_ns(it->second, gemm.duration_ns, comm.ns, tp, units, comm.channels);
    gemm.name = gemm.name.str() + " +" + to_string(segs[k].op);
    gemm.bytes += segs[k].comm_bytes;
    // The collective is gone: the compute segments on either side become one
    // (unless the first ends a run beside an MoE exchange, which the second waits
    // for). Either way the next segment to look at is the one now at k.
    const auto pos = static_cast<std::ptrdiff_t>(k);
    if (k > 0 && k + 1 < segs.size() && can_join(segs[k - 1], segs[k + 1])) {
      join(segs[k - 1], std::move(segs[k + 1]));
      segs.erase(segs.begin() + pos, segs.begin() + pos + 2);
    } else {
      recompute_totals(segs[at]);
      segs.erase(segs.begin() + pos);
    }
  }
}

}  // namespace strata::sim
