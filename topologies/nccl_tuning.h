// NCCL's cost model constants, one table keyed by NCCL version.
//
// Every figure below is read from NVIDIA/nccl at the tagged version:
// src/graph/tuning.cc (latencies, per-channel bandwidth caps, protocol factors,
// tree correction), src/graph/search.cc (the per-channel speeds the ring search
// tries, channel duplication) and src/graph/topo.h. The model that uses them is
// in collective_model.cc; docs/topologies.md explains it.
//
// Index conventions: algorithms {tree, ring, nvls, nvls_tree}; protocols {LL,
// LL128, Simple}; hardware {NVLink, PCI, network}; GPU generations {Volta,
// Ampere, Hopper}; node-count classes {1 node, 2 nodes, more}; collectives
// {broadcast, reduce, all-gather, reduce-scatter, all-reduce}.
#pragma once

#include <string>
#include <vector>

namespace strata::topo {

struct NcclTuning {
  static constexpr int kTree = 0, kRing = 1, kNvls = 2, kNvlsTree = 3;
  static constexpr int kLL = 0, kLL128 = 1, kSimple = 2;
  static constexpr int kHwNvlink = 0, kHwPci = 1, kHwNet = 2;

  std::string version;  // "2.20.3"
  std::string source;   // where the figures come from

  // Latencies, microseconds.
  double base_latency_us[4][3] = {};
  double hw_latency_us[3][4][3] = {};
  // LL latency inside a node is multiplied by this when the communicator spans
  // nodes (2.7: 1.8; later: 1).
  double ll_intra_latency_multinode_factor = 1.0;
  // Ring all-reduce steps over the network: 2·(nodes−1) (2.7) or 2·nodes (2.20).
  bool allreduce_inter_steps_2n = false;
  // Per network step a ring launches at least this many microseconds of proxy work
  // (Intel, AMD CPUs), ×3 for Simple. 0: not modelled by this version.
  double net_overhead_us_intel = 0.0;
  double net_overhead_us_amd = 0.0;
  // Ring Simple all-reduce across nodes: latency ×factor once the message is large
  // ("plateau effect of ring"). 2.7: ×1.9 when bytes ≥ ranks/16·64 KiB; 2.20: ×1.4
  // (×1.9 before Ampere) when bytes/(channels·ranks) ≥ 64.
  bool plateau_per_channel_rank = false;
  double plateau_factor = 1.0;
  double plateau_factor_pre_ampere = 1.0;

  // Bandwidth refinements (GB/s, 1e9 bytes/s).
  double sm80_busbw_cap = 0.0;  // 2.7: every algorithm capped at 235 on Ampere; 0: none
  double ring_ll_factor_allreduce = 0.25;   // all-reduce, reduce or multi-node
  double ring_ll_factor_other = 1.0 / 3.0;
  double ll_max_busbw[3][3] = {};           // 2.20 llMaxBws[gen-or-cpu][nodes]; 0: no cap
  double ring_ll128_factor = 0.92;
  double ring_ll128_factor_one_ppn = 0.7;   // one GPU per node
  double ring_ll128_per_channel_by_coll[5] = {};  // 2.7 ll128MaxBwPerCh; 0: use the next
  double ring_ll128_per_channel[3][3] = {};       // 2.20 perChMaxRingLL128Bws
  double tree_factor = 0.92;
  double tree_per_channel[3][3] = {};             // 2.20 perChMaxTreeBws; 0: use tree_max_busbw
  double tree_max_busbw_small = 0.0;              // 2.7, ≤ 2 nodes: 110 (130 for Ampere LL128)
  double tree_max_busbw_small_ll128_sm80 = 0.0;
  double tree_max_busbw_large = 0.0;              // 2.7, > 2 nodes: 80 (105)
  double tree_max_busbw_large_ll128_sm80 = 0.0;
  double tree_ll_factor = 1.0 / 3.8;
  double tree_ll128_factor_one_node = 7.0 / 9.0;
  double tree_ll128_factor_multinode = 120.0 / 128.0;
  double tree_ll128_per_channel[3][3] = {};       // 2.20 perChMaxTreeLL128Bws
  bool tree_ll128_by_coll = false;                // 2.7: cap = ll128MaxBwPerCh[coll]·channels·7/9
  double tree_hopper_pattern_factor = 1.0;        // 2.20: Hopper trees use the simple TREE pattern, ×0.85
  double nvls_busbw_to_algbw = 5.0 / 6.0;
  std::vector<double> tree_correction[3];         // per protocol, powers of two from 64 B

  // Channel search (search.cc): per-channel speeds tried, GB/s, descending.
  std::vector<double> speeds_intra;          // single node, before Hopper
  std::vector<double> speeds_inter;          // with a network, before Hopper
  std::vector<double> speeds_intra_sm90;
  std::vector<double> speeds_inter_sm90;
  int max_search_channels = 16;              // MAXCHANNELS / 2
  int max_channels = 32;                     // MAXCHANNELS
  double dup_channels_min_speed = 25.0;      // duplicate channels when the speed is ≥ this
  bool dup_sm90_rule = false;                // 2.20: on Hopper only if speed ≥ 50 or ≤ 4 channels

  // Algorithms and protocols this version has.
  bool has_nvls = false;
  bool ll128_on_hopper = false;              // 2.7 enables LL128 on Volta and Ampere only
};

// The table: every version Strata knows, oldest first.
const std::vector<NcclTuning>& nccl_tuning_table();
// The version used when none is named (the newest).
const NcclTuning& default_nccl_tuning();
// Throws InputError(file "", json_path "nccl_version") naming the known versions.
const NcclTuning& nccl_tuning(const std::string& version);

}  // namespace strata::topo
