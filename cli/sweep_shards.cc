#include "cli/sweep_shards.h"

#include <cstring>

#include "core/error.h"

#ifdef STRATA_CLI_HAVE_MPI
#include <mpi.h>
#endif

namespace strata::cli {
namespace {

// The simulated metrics of one plan, as doubles.
constexpr int kFields = 9 + sim::kNumCommKinds;

void pack(const sim::PlanOutcome& o, double* f) {
  const double values[] = {o.step_time_s, o.tokens_per_s, o.mfu, o.hfu, o.tflops_per_gpu,
                           o.bubble_ratio, o.compute_s, o.folded_step_time_s, 0.0};
  std::memcpy(f, values, sizeof(values));
  for (int k = 0; k < sim::kNumCommKinds; ++k) f[9 + k] = o.exposed_s[k];
}

void unpack(const double* f, sim::PlanOutcome& o) {
  o.simulated = true;
  o.fidelity = "folded";
  o.step_time_s = f[0];
  o.tokens_per_s = f[1];
  o.mfu = f[2];
  o.hfu = f[3];
  o.tflops_per_gpu = f[4];
  o.bubble_ratio = f[5];
  o.compute_s = f[6];
  o.folded_step_time_s = f[7];
  for (int k = 0; k < sim::kNumCommKinds; ++k) o.exposed_s[k] = f[9 + k];
}

}  // namespace

bool sweep_is_sharded(int& rank, int& size) {
#ifdef STRATA_CLI_HAVE_MPI
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) return false;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size > 1;
#else
  rank = 0;
  size = 1;
  return false;
#endif
}

void gather_sweep(sim::SweepResult& sweep, int rank, int size) {
#ifdef STRATA_CLI_HAVE_MPI
  // Each record: the plan index, then its fields.
  std::vector<double> mine;
  for (std::size_t i = 0; i < sweep.plans.size(); ++i) {
    if (!sweep.plans[i].simulated) continue;
    mine.push_back(static_cast<double>(i));
    mine.resize(mine.size() + kFields);
    pack(sweep.plans[i], mine.data() + mine.size() - kFields);
  }
  int count = static_cast<int>(mine.size());
  std::vector<int> counts(size), offsets(size);
  MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<double> all;
  if (rank == 0) {
    int total = 0;
    for (int r = 0; r < size; ++r) {
      offsets[r] = total;
      total += counts[r];
    }
    all.resize(total);
  }
  MPI_Gatherv(mine.data(), count, MPI_DOUBLE, all.data(), counts.data(), offsets.data(), MPI_DOUBLE, 0,
              MPI_COMM_WORLD);
  if (rank != 0) return;
  std::int64_t simulated = 0;
  for (std::size_t k = 0; k + kFields < all.size() + 1; k += kFields + 1) {
    const auto index = static_cast<std::size_t>(all[k]);
    unpack(all.data() + k + 1, sweep.plans.at(index));
    ++simulated;
  }
  sweep.counts.simulated = simulated;
#else
  (void)sweep;
  (void)rank;
  (void)size;
  throw InternalError("sharded sweep without MPI support in this build");
#endif
}

}  // namespace strata::cli
