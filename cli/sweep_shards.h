// Sharded sweeps: under mpirun each rank simulates every size-th plan and rank 0
// gathers the results (MPI_Gatherv of the raw metrics, so the merged sweep is
// bit-identical to a single process's).
#pragma once

#include "sweep/sweep.h"

namespace strata::cli {

// True when this process runs as one of several MPI ranks.
bool sweep_is_sharded(int& rank, int& size);
// Sends this rank's simulated outcomes to rank 0, which merges them into `sweep`.
void gather_sweep(sim::SweepResult& sweep, int rank, int size);

}  // namespace strata::cli
