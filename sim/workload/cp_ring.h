// Context parallelism's ring (cp_comm_type p2p): each step's K/V transfer runs
// beside that step's attention, and the next step starts when both are done
// (Transformer Engine's attention with context parallelism: step i waits for
// the K/V of step i - 1 and sends them on while it computes). The segments
// carry the transfers as context-parallel send_recv segments marked
// beside_previous (segments.h); this folds each into the step before it, as
// tp_overlap.h folds the collectives Transformer Engine runs under its GEMMs:
// a step of A with a transfer of C takes max(A, C); what C exceeds A by is a
// detail of its own ("cp ring wait", category cp), so a trace shows where the
// ring is bandwidth-bound. Folded fidelity only: there the transfer is costed
// with the ring's other edges and tensor-parallel ranks' copies, alone otherwise.
// Not modelled: the SMs NCCL's send/receive kernel takes.
#pragma once

#include <functional>
#include <vector>

#include "sim/workload/segments.h"

namespace strata::sim {

// The time of one ring edge's transfer of `bytes`.
using CpRingTime = std::function<TimeNs(double bytes)>;

void overlap_cp_ring_steps(std::vector<Segment>& segs, const CpRingTime& send_ns);

// Full fidelity: each transfer a task of its own (every tensor-parallel rank's
// send to its next context-parallel rank, WorkloadBuild::cp_ring_transfer), its
// flows on the links beside all other traffic: moved before the step it runs
// beside and marked beside_next, the step (split from what precedes it in its
// segment) ending that run (Segment::beside_end), so the next step and the next
// transfer wait for both. (Transformer Engine launches transfer i + 1 once
// transfer i is done; here it also waits for step i, as the folded max(A, C) does.)
void cp_ring_transfers_beside(std::vector<Segment>& segs);

}  // namespace strata::sim
