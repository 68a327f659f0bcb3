#include "topologies/nccl_cost.h"

#include <algorithm>

namespace strata::topo {
namespace {

// NCCL's collective index for the per-collective LL128 caps of older versions:
// broadcast, reduce, all-gather, reduce-scatter, all-reduce.
int coll_index(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kBroadcast: return 0;
    case CollectiveOp::kAllGather: return 2;
    case CollectiveOp::kReduceScatter: return 3;
    case CollectiveOp::kAllReduce: return 4;
    default: return 4;
  }
}

bool ll128_enabled(const NcclTuning& t, const NcclGraphs& g) {
  const int cc = g.shape.min_compute_capability;
  if (cc != g.shape.max_compute_capability) return false;
  const bool generation_ok = cc == 70 || cc == 80 || (cc == 90 && t.ll128_on_hopper);
  return generation_ok && g.ring.nvlink_intra && g.ring.nic_near_gpu;
}

}  // namespace

int nccl_log2i(unsigned long long n) {
  int l = 0;
  while (n >>= 1) ++l;
  return l;
}

NcclCost nccl_cost(const NcclTuning& t, CollectiveOp op, int a, int p, const NcclGraphs& g) {
  NcclCost out;
  const GroupShape& s = g.shape;
  const int n = s.ranks();
  const int nodes = s.node_count();
  const bool all_reduce = op == CollectiveOp::kAllReduce;
  const bool gather_scatter = op == CollectiveOp::kAllGather || op == CollectiveOp::kReduceScatter;
  const bool nvls_family = a == NcclTuning::kNvls || a == NcclTuning::kNvlsTree;

  // Which algorithms exist for the collective (tuning.cc's `continue`s and algoEnable).
  if (op != CollectiveOp::kAllReduce && !gather_scatter && op != CollectiveOp::kBroadcast) return out;
  if ((a == NcclTuning::kTree || a == NcclTuning::kNvlsTree) && !all_reduce) return out;
  if (a == NcclTuning::kNvls && !(all_reduce || gather_scatter)) return out;
  if (nvls_family && (p != NcclTuning::kSimple || !t.has_nvls || !g.nvls.available)) return out;
  if (a == NcclTuning::kNvls && nodes != 1) return out;       // multi-node NVLS needs CollNet
  if (a == NcclTuning::kNvlsTree && nodes < 2) return out;
  if (p == NcclTuning::kLL128 && !ll128_enabled(t, g)) return out;
  if (g.ring.channels == 0) return out;

  const int nsteps = all_reduce ? 2 * (n - 1) : gather_scatter ? n - 1 : n;
  const int inter_steps = all_reduce ? (t.allreduce_inter_steps_2n ? (nodes > 1 ? 2 * nodes : 0)
                                                                   : 2 * (nodes - 1))
                          : gather_scatter ? nodes - 1
                                           : nodes;
  const double ppn = static_cast<double>(n) / nodes;
  const int gen = s.generation();
  const int idx2 = nodes <= 2 ? nodes - 1 : 2;
  const int idx1 = nodes == 1 ? gen : (s.amd_cpu ? 1 : 0);
  const double ll_max = t.ll_max_busbw[idx1][idx2];
  const bool only_sm80 = s.min_compute_capability == 80 && s.max_compute_capability == 80;

  int channels = g.ring.channels;
  double bw = g.ring.speed_gbytes_per_s;
  if (a == NcclTuning::kNvls) {
    channels = g.nvls.channels;
    bw = g.nvls.speed_intra_gbytes_per_s;
  } else if (a == NcclTuning::kNvlsTree) {
    channels = g.nvls.channels;
    double inter = largest_speed_at_most(t.speeds_inter_sm90, g.ring.max_single_channel_gbytes_per_s);
    bw = std::min(g.nvls.speed_intra_gbytes_per_s, nodes <= 2 ? inter : inter / 2.0);
  }
  double busbw = channels * bw;

  // "Various model refinements", in tuning.cc's order.
  if (t.sm80_busbw_cap > 0.0 && only_sm80) busbw = std::min(busbw, t.sm80_busbw_cap);
  if (a == NcclTuning::kRing && p == NcclTuning::kLL) {
    busbw *= (nodes > 1 || all_reduce) ? t.ring_ll_factor_allreduce : t.ring_ll_factor_other;
    if (ll_max > 0.0) busbw = std::min(busbw, ll_max);
  }
  if (a == NcclTuning::kRing && p == NcclTuning::kLL128) {
    const double by_coll = t.ring_ll128_per_channel_by_coll[coll_index(op)];
    const double cap = channels * (by_coll > 0.0 ? by_coll : t.ring_ll128_per_channel[gen][idx2]);
    busbw = std::min(busbw * (ppn < 2 ? t.ring_ll128_factor_one_ppn : t.ring_ll128_factor), cap);
  }
  if (a == NcclTuning::kTree) {
    if (t.tree_per_channel[gen][idx2] > 0.0) {
      busbw = std::min(busbw * t.tree_factor, channels * t.tree_per_channel[gen][idx2]);
    } else {
      const bool ll128 = p == NcclTuning::kLL128 && only_sm80;
      const double cap = nodes > 2 ? (ll128 ? t.tree_max_busbw_large_ll128_sm80 : t.tree_max_busbw_large)
                                   : (ll128 ? t.tree_max_busbw_small_ll128_sm80 : t.tree_max_busbw_small);
      busbw = std::min(busbw * t.tree_factor, cap);
    }
    if (p == NcclTuning::kLL) {
      busbw *= t.tree_ll_factor;
      if (ll_max > 0.0) busbw = std::min(busbw, ll_max);
    }
    if (p == NcclTuning::kLL128) {
      const double f = nodes == 1 ? t.tree_ll128_factor_one_node : t.tree_ll128_factor_multinode;
      const double cap = t.tree_ll128_by_coll
                             ? t.ring_ll128_per_channel_by_coll[coll_index(op)] * channels * 7.0 / 9.0
                             : t.tree_ll128_per_channel[gen][idx2] * channels;
      busbw = std::min(busbw * f, cap);
    }
    if (gen == 2) busbw *= t.tree_hopper_pattern_factor;
  }
  const double ratio = a == NcclTuning::kRing ? static_cast<double>(n) / nsteps
                       : nvls_family          ? t.nvls_busbw_to_algbw
                                              : 0.5;
  out.bandwidth_gbytes_per_s = busbw * ratio;
  out.channels = channels;

  // Latency.
  const int intra_hw = nvls_family ? NcclTuning::kHwNvlink
                       : g.ring.nvlink_intra ? NcclTuning::kHwNvlink
                                             : NcclTuning::kHwPci;
  double intra_lat = t.hw_latency_us[intra_hw][a][p];
  if (nodes > 1 && p == NcclTuning::kLL) intra_lat *= t.ll_intra_latency_multinode_factor;
  const double inter_lat = t.hw_latency_us[NcclTuning::kHwNet][a][p];
  double lat = t.base_latency_us[a][p];
  if (a == NcclTuning::kRing) {
    if (op == CollectiveOp::kBroadcast) {
      // Identical channels (NCCL's sameChannels): one hop's latency.
      lat += t.hw_latency_us[nodes == 1 ? intra_hw : NcclTuning::kHwNet][a][p];
    } else {
      if (nodes > 1 && t.net_overhead_us_intel > 0.0) {
        double overhead = s.amd_cpu ? t.net_overhead_us_amd : t.net_overhead_us_intel;
        if (p == NcclTuning::kSimple) overhead *= 3.0;
        intra_lat = std::max(intra_lat, overhead);
      }
      lat += (nsteps - inter_steps) * intra_lat + inter_steps * inter_lat;
    }
  } else if (a == NcclTuning::kTree) {
    lat += 2.0 * ((n / nodes - 1) * intra_lat + nccl_log2i(static_cast<unsigned long long>(nodes)) * inter_lat);
  } else if (a == NcclTuning::kNvls) {
    lat = intra_lat + (nodes > 1 ? inter_lat : 0.0);
  } else {
    lat += intra_lat + 2.0 * nccl_log2i(static_cast<unsigned long long>(nodes)) * inter_lat;
  }
  out.latency_us = lat;
  out.available = out.bandwidth_gbytes_per_s > 0.0;
  return out;
}

std::pair<double, double> nccl_time_us(const NcclTuning& t, CollectiveOp op, int a, int p,
                                       const NcclCost& cost, const NcclGraphs& g, double bytes) {
  double bw = cost.bandwidth_gbytes_per_s;
  double lat = cost.latency_us;
  if (a == NcclTuning::kTree) {
    int log_size = nccl_log2i(static_cast<unsigned long long>(bytes) >> 6);
    const auto& corr = t.tree_correction[p];
    if (log_size < static_cast<int>(corr.size())) bw *= corr[static_cast<std::size_t>(log_size)];
  }
  const int n = g.shape.ranks();
  if (a == NcclTuning::kRing && p == NcclTuning::kSimple && g.shape.node_count() > 1 &&
      op == CollectiveOp::kAllReduce) {
    const bool plateau = t.plateau_per_channel_rank
                             ? bytes / (static_cast<double>(cost.channels) * n) >= 64.0
                             : bytes >= n / 16.0 * 65536.0;
    if (plateau) {
      lat *= g.shape.min_compute_capability < 80 ? t.plateau_factor_pre_ampere : t.plateau_factor;
    }
  }
  return {lat, bytes / (1000.0 * bw)};
}

}  // namespace strata::topo
