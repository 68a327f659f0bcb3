// NCCL's per-algorithm, per-protocol cost (src/graph/tuning.cc, ncclTopoTuneModel
// and ncclTopoGetAlgoTime) evaluated on the channels Strata's search found.
// Internal to the collective model.
#pragma once

#include "core/collective.h"
#include "topologies/nccl_channels.h"
#include "topologies/nccl_tuning.h"

namespace strata::topo {

struct NcclGraphs {
  GroupShape shape;
  RingGraph ring;    // also stands for the tree graph (same channels and speed)
  NvlsGraph nvls;
};

// Bandwidth (GB/s, as in tuning.cc: bytes / (1000·bw) microseconds) and latency
// (microseconds) of one algorithm (NcclTuning::kTree..kNvlsTree) and protocol.
struct NcclCost {
  bool available = false;
  double bandwidth_gbytes_per_s = 0.0;
  double latency_us = 0.0;
  int channels = 0;
};

NcclCost nccl_cost(const NcclTuning& tuning, CollectiveOp op, int algorithm, int protocol,
                   const NcclGraphs& graphs);

// ncclTopoGetAlgoTime: the tree's per-size correction and the ring's plateau.
// Returns {latency_us, bandwidth time in microseconds}.
std::pair<double, double> nccl_time_us(const NcclTuning& tuning, CollectiveOp op, int algorithm,
                                       int protocol, const NcclCost& cost, const NcclGraphs& graphs,
                                       double bytes);

// floor(log2(n)) with log2i(0) = 0, as NCCL's log2i.
int nccl_log2i(unsigned long long n);

}  // namespace strata::topo
