#include "sim/workload/cp_ring.h"

#include <algorithm>
#include <cstddef>

namespace strata::sim {

void overlap_cp_ring_steps(std::vector<Segment>& segs, const CpRingTime& send_ns) {
  std::size_t k = 1;
  while (k < segs.size()) {
    Segment& transfer = segs[k];
    Segment& before = segs[k - 1];
    if (!transfer.is_comm || !transfer.beside_previous || before.is_comm || before.ops.empty()) {
      ++k;
      continue;
    }
    const TimeNs step_ns = before.ops.back().duration_ns;
    const TimeNs comm_ns = send_ns(transfer.comm_bytes);
    before.ops.back().name = before.ops.back().name.str() + " +send_recv";
    // The wait is the transfer's, on the model-parallel lane where it runs: exposed
    // cp in the metrics, not compute.
    if (comm_ns > step_ns) {
      before.ops.push_back({"cp ring wait", Category::kCp, comm_ns - step_ns, 0.0, 0.0, StreamKind::kTpComm});
    }
    // The transfer is gone: the steps on either side become one compute segment.
    const auto pos = static_cast<std::ptrdiff_t>(k);
    if (k + 1 < segs.size() && can_join(before, segs[k + 1])) {
      join(before, std::move(segs[k + 1]));
      segs.erase(segs.begin() + pos, segs.begin() + pos + 2);
    } else {
      recompute_totals(before);
      segs.erase(segs.begin() + pos);
    }
  }
}

void cp_ring_transfers_beside(std::vector<Segment>& segs) {
  for (std::size_t k = 1; k < segs.size(); ++k) {
    if (!segs[k].is_comm || !segs[k].beside_previous || segs[k - 1].is_comm || segs[k - 1].ops.empty()) continue;
    Segment transfer = std::move(segs[k]);
    transfer.beside_previous = false;
    transfer.beside_next = true;
    Segment step;
    step.ops.push_back(std::move(segs[k - 1].ops.back()));
    step.beside_end = true;
    recompute_totals(step);
    segs[k - 1].ops.pop_back();
    if (segs[k - 1].ops.empty()) {
      // The segment was the step alone: it becomes the transfer, the step after it.
      step.hook = segs[k - 1].hook;
      segs[k - 1] = std::move(transfer);
      segs[k] = std::move(step);
    } else {
      recompute_totals(segs[k - 1]);
      segs[k] = std::move(step);
      segs.insert(segs.begin() + static_cast<std::ptrdiff_t>(k), std::move(transfer));
      ++k;
    }
  }
}

}  // namespace strata::sim
