// Which GPU a rank opens, from what its process sees.
//
// Launchers bind GPUs two ways: every task sees all of the node's GPUs (mpirun,
// torchrun-style launches) and picks its local rank's; or each task is given one
// GPU (`srun --gpus-per-task=1`, a per-rank CUDA_VISIBLE_DEVICES), which the CUDA
// runtime then numbers 0 whatever its physical index. Opening device number
// local_rank is right only in the first case.
#pragma once

namespace strata::rt {

// The CUDA ordinal this rank opens: 0 when its process sees one GPU (one GPU per
// task), its local rank when it sees at least one per rank on the node. Throws
// InputError, naming the launch variables, when it sees several GPUs but fewer
// than the node's ranks (a binding that would put two ranks on one GPU or open
// one that is not there). visible 0 gives 0: opening it then says there is no GPU.
int cuda_ordinal_for_rank(int visible_gpus, int local_rank, int local_size);

}  // namespace strata::rt
