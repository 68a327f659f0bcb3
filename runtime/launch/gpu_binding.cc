#include "runtime/launch/gpu_binding.h"

#include <fmt/format.h>

#include "core/error.h"

namespace strata::rt {

int cuda_ordinal_for_rank(int visible_gpus, int local_rank, int local_size) {
  if (visible_gpus <= 1) return 0;
  if (local_rank < visible_gpus && local_size <= visible_gpus) return local_rank;
  throw InputError("", "",
                   fmt::format("this rank (local rank {} of {} on its node) sees {} GPUs: give each rank one GPU "
                               "(srun --gpus-per-task=1, or CUDA_VISIBLE_DEVICES per rank) or show every rank "
                               "at least as many GPUs as the node has ranks",
                               local_rank, local_size, visible_gpus));
}

}  // namespace strata::rt
