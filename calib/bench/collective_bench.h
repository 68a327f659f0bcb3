// Collective microbenchmarks over the ranks of this launch, with nccl-tests'
// method and conventions: for each operation and group size, message sizes
// doubling from 1 KiB until a bound set by memory or time; warm-up, then
// samples of back-to-back operations between barriers, each sample's time the
// slowest rank's (a collective is done when every rank is), the median over
// samples; algbw = bytes / time and busbw = algbw * the operation's factor
// (core/collective.h); inputs are never all zeros and every result is checked
// against the values the ranks sent.
#pragma once

#include <functional>
#include <vector>

#include "calib/bench/measure.h"
#include "costmodel/fitting.h"
#include "runtime/comm/communicator.h"

namespace strata::calib {

struct CollectiveBenchOptions {
  double min_bytes = 1024.0;
  double max_bytes = 64.0 * 1024 * 1024;  // also capped by the device's memory
  double max_op_s = 0.05;                 // stop growing once one operation takes this long
  TimingOptions timing;
  // Ranks per node: a group of more ranks than this spans nodes (inter-node).
  int ranks_per_node = 1;
};

// Group sizes calibration measures on `world_size` ranks: powers of two from 2,
// and world_size itself.
std::vector<int> collective_group_sizes(int world_size);

// Measures every operation for every group size (the group of the first g
// ranks; the others wait at a barrier). Collective over `world`: every rank
// must call it. Each rank returns the curves of the groups it was in, so rank 0
// (in every group) returns them all; members of a group agree on its numbers.
// progress(done) counts finished curves. Throws CommError or InternalError on
// failure or a wrong result.
std::vector<CollectiveMeasurement> bench_collectives(
    rt::Communicator& world, const CollectiveBenchOptions& options,
    const std::function<void(std::size_t)>& progress);

// Where one size step multiplies the time by more than kCliffFactor times the
// size (the cost per byte jumps), a curve has a cliff between the two sizes: the
// library switching algorithm or protocol. Open MPI 4.1's shared-memory
// reduce_scatter over 2 ranks takes 2.5 ms at 15.3 MiB and 70 ms at 16 MiB on this
// project's host; interpolating between the doubling sizes 8 and 16 MiB put a
// ZeRO-1 step's 13.7 MB gradient reduce-scatter at 23 ms when it takes 2.5 ms.
inline constexpr double kCliffFactor = 2.0;
inline constexpr int kCliffBisections = 4;
bool is_cliff(const SizePoint& lo, const SizePoint& hi);

// For each cliff between adjacent points (sorted by bytes), measures
// kCliffBisections sizes bisecting it geometrically, each time following the half
// with the larger jump in cost per byte, and adds them: the cliff is then known to
// within a factor 2^(1/2^kCliffBisections) of size (4.4%). Points stay sorted.
// In bench_collectives every group member decides alike: the times are the
// slowest rank's, the same on all.
void refine_cliffs(const std::function<SizePoint(double)>& measure, std::vector<SizePoint>& points);

// Number of curves bench_collectives measures on world_size ranks.
std::size_t collective_curve_count(int world_size);

}  // namespace strata::calib
