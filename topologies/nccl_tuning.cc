#include "topologies/nccl_tuning.h"

#include "core/error.h"

namespace strata::topo {
namespace {

NcclTuning nccl_2_7_5() {
  NcclTuning t;
  t.version = "2.7.5";
  t.source =
      "NVIDIA/nccl v2.7.5 (commit 01afd20a77b5804e0ecf1042509dd9d20ebf9e93): src/graph/tuning.cc "
      "baseLat, hwLat, ll128MaxBwPerCh, treeCorrectionFactor and ncclTopoTuneModel's refinements; "
      "src/graph/search.cc speedArray and channel duplication";
  // baseLat: Tree {LL, LL128, Simple}, Ring {...}.
  const double base[2][3] = {{4.4, 4.4, 0}, {3.6, 10.0, 8.4}};
  // hwLat[NVLink, PCI, NET][Tree, Ring][LL, LL128, Simple].
  const double hw[3][2][3] = {{{.52, 1.2, 28}, {.47, 1.9, 3.4}},
                              {{1.0, 1.9, 28}, {1.0, 2.5, 5.7}},
                              {{5.0, 8.5, 50}, {2.7, 4.0, 9.6}}};
  for (int a = 0; a < 2; ++a) {
    for (int p = 0; p < 3; ++p) {
      t.base_latency_us[a][p] = base[a][p];
      for (int h = 0; h < 3; ++h) t.hw_latency_us[h][a][p] = hw[h][a][p];
    }
  }
  t.ll_intra_latency_multinode_factor = 1.8;
  t.allreduce_inter_steps_2n = false;
  t.plateau_per_channel_rank = false;
  t.plateau_factor = 1.9;
  t.plateau_factor_pre_ampere = 1.9;
  t.sm80_busbw_cap = 235.0;
  const double ll128_by_coll[5] = {18.8, 12.0, 18.3, 15.2, 16.7};
  for (int c = 0; c < 5; ++c) t.ring_ll128_per_channel_by_coll[c] = ll128_by_coll[c];
  t.tree_factor = 0.9;
  t.tree_max_busbw_small = 110.0;
  t.tree_max_busbw_small_ll128_sm80 = 130.0;
  t.tree_max_busbw_large = 80.0;
  t.tree_max_busbw_large_ll128_sm80 = 105.0;
  t.tree_ll128_factor_multinode = 0.915;
  t.tree_ll128_by_coll = true;
  t.tree_correction[0] = {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6,
                          .5,  .4,  .4,  .5,  .6, .7, .8, .9, 1.0, 1.0, 1.0};
  t.tree_correction[1] = {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6,
                          .6,  .6,  .5,  .6,  .6,  .7, .7, .8, .9, .9, 1.0};
  t.tree_correction[2] = {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6,
                          .5, .5, .5, .5, .5, .5, .6, .6, .7, .8, .9};
  t.speeds_intra = {42.0, 24.0, 21.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0,
                    6.0,  5.0,  4.0,  3.0,  2.4,  1.2,  0.24, 0.12};
  t.speeds_inter = t.speeds_intra;
  t.speeds_intra_sm90 = t.speeds_intra;
  t.speeds_inter_sm90 = t.speeds_intra;
  t.dup_channels_min_speed = 25.0;
  t.dup_sm90_rule = false;
  t.has_nvls = false;
  t.ll128_on_hopper = false;
  return t;
}

NcclTuning nccl_2_20_3() {
  NcclTuning t;
  t.version = "2.20.3";
  t.source =
      "NVIDIA/nccl v2.20.3 (commit b6475625fbcaa2c3c0e50eed2fa1255d7514d4a2): src/graph/tuning.cc "
      "baseLat, hwLat, llMaxBws, perChMaxRingLL128Bws, perChMaxTreeLL128Bws, perChMaxTreeBws, "
      "getNetOverhead, treeCorrectionFactor and ncclTopoTuneModel's refinements; "
      "src/graph/search.cc speedArrayIntra/Inter, sm90SpeedArrayIntra/Inter, ncclTopoDupChannels";
  // baseLat: Tree, Ring, NVLS, NVLS_TREE (CollNet omitted: Strata models no SHARP fabric).
  const double base[4][3] = {{6.8, 14.0, 0}, {6.6, 14.0, 8.4}, {0, 0, 0}, {0, 0, 0}};
  const double hw[3][4][3] = {{{.6, 1.25, 28}, {.6, 1.9, 3.4}, {0, 0, 23}, {0, 0, 23}},
                              {{1.0, 1.9, 28}, {1.0, 2.5, 5.7}, {0, 0, 0}, {0, 0, 0}},
                              {{5.0, 8.5, 28}, {2.7, 4.0, 14.0}, {0, 0, 18}, {0, 0, 14}}};
  for (int a = 0; a < 4; ++a) {
    for (int p = 0; p < 3; ++p) {
      t.base_latency_us[a][p] = base[a][p];
      for (int h = 0; h < 3; ++h) t.hw_latency_us[h][a][p] = hw[h][a][p];
    }
  }
  t.ll_intra_latency_multinode_factor = 1.0;
  t.allreduce_inter_steps_2n = true;
  t.net_overhead_us_intel = 1.0;
  t.net_overhead_us_amd = 2.0;
  t.plateau_per_channel_rank = true;
  t.plateau_factor = 1.4;
  t.plateau_factor_pre_ampere = 1.9;
  const double ll_max[3][3] = {{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {87.7, 22.5, 19.0}};
  const double ring_ll128[3][3] = {{20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 36.7}};
  const double tree_ll128[3][3] = {{20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 29.0}};
  const double tree[3][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}};
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      t.ll_max_busbw[i][j] = ll_max[i][j];
      t.ring_ll128_per_channel[i][j] = ring_ll128[i][j];
      t.tree_ll128_per_channel[i][j] = tree_ll128[i][j];
      t.tree_per_channel[i][j] = tree[i][j];
    }
  }
  t.tree_factor = 0.92;
  t.tree_ll128_factor_multinode = 120.0 / 128.0;
  t.tree_hopper_pattern_factor = 0.85;
  t.tree_correction[0] = {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5,
                          .4,  .4,  .5,  .6,  .7, .8, .9, 1.0, 1.0, 1.0, 1.0};
  t.tree_correction[1] = {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6,
                          .6,  .6,  .6,  .6,  .8,  .9, .9, .9, .9, 1.0, 1.0};
  t.tree_correction[2] = {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5,
                          .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9};
  t.speeds_intra = {40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0};
  t.speeds_inter = {48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0,
                    7.0,  6.0,  5.0,  4.0,  3.0,  2.4,  1.2,  0.24, 0.12};
  t.speeds_intra_sm90 = {60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 6.0, 3.0};
  t.speeds_inter_sm90 = {48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5,
                         15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};
  t.dup_channels_min_speed = 25.0;
  t.dup_sm90_rule = true;
  t.has_nvls = true;
  t.ll128_on_hopper = true;
  return t;
}

}  // namespace

const std::vector<NcclTuning>& nccl_tuning_table() {
  static const std::vector<NcclTuning> table = {nccl_2_7_5(), nccl_2_20_3()};
  return table;
}

const NcclTuning& default_nccl_tuning() { return nccl_tuning_table().back(); }

const NcclTuning& nccl_tuning(const std::string& version) {
  std::string known;
  for (const NcclTuning& t : nccl_tuning_table()) {
    if (t.version == version) return t;
    known += (known.empty() ? "" : ", ") + t.version;
  }
  throw InputError("", "nccl_version",
                   "no tuning table for NCCL " + version + " (known: " + known + ")");
}

}  // namespace strata::topo
