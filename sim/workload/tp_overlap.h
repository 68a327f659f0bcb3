// Tensor-parallel collectives run under the GEMMs next to them, as Transformer
// Engine's userbuffers overlap them (the framework profile's tp_overlap).
//
// With sequence parallelism every transformer layer has, per micro-batch, an
// all-gather before the QKV and fc1 GEMMs and a reduce-scatter after the
// projection and fc2 (forward), and the conjugates in the backward: an
// all-gather before the projection's and fc2's data-gradient GEMMs, a
// reduce-scatter of QKV's and fc1's input gradient, which TE runs under their
// weight-gradient GEMMs, and the all-gather of QKV's and fc1's input again for
// their weight gradients, which TE runs under their data-gradient GEMMs. TE
// names each GEMM (qkv_fprop, fc2_dgrad, fc1_wgrad, ...) and overlaps its
// collective by one of three methods. For a GEMM of time G
// on `units` SMs and a collective of time C (alone, on the tensor-parallel group):
//   ring_exchange: the GEMM in tp chunks, each chunk's transfer (copy engines,
//     num_sm SMs for the kernel that drives them) under the previous chunk's
//     GEMM: max(G', C) + min(G', C) / tp;
//   pipeline: the GEMM in num_splits chunks, each chunk's collective (on num_sm
//     SMs) under the next chunk's GEMM: max(G', C) + min(G', C) / num_splits;
//   bulk: the whole collective (on num_sm SMs) beside the whole GEMM: max(G', C);
// where G' = G * units / (units - num_sm): the GEMM runs on the SMs the
// communication leaves it (TE's set_sm_margin; NVIDIA's userbuffers docs).
// Not modelled: the chunked GEMMs' own efficiency (smaller shapes), and the
// overlapped collective's traffic beside other traffic on the links (it is costed
// alone). The GEMM's op then holds the collective ("qkv +all_gather"), and the
// collective leaves the tp-comm lane.
#pragma once

#include <functional>
#include <vector>

#include "costmodel/framework_profile.h"
#include "sim/workload/segments.h"

namespace strata::sim {

// A collective alone on the tensor-parallel group: its time and the SMs its
// kernel occupies (CommSpec::channels).
struct TpComm {
  TimeNs ns = 0;
  int channels = 0;
};
using TpCommTime = std::function<TpComm(CollectiveOp op, double bytes)>;

// Fuses every collective of `segs` that `overlap` names the GEMM of into that
// GEMM's op, merging the compute segments around it. tp: the group's size;
// units: the GPU's SMs (0: unknown, no SM share costed).
void overlap_tp_collectives(std::vector<Segment>& segs, const TpOverlap& overlap, int tp, int units,
                            const TpCommTime& comm_ns);

// Megatron's asynchronous column-parallel backward as an overlap table: the
// gather beside the data-gradient GEMM, the input gradient's reduction beside the
// weight-gradient GEMM, for QKV, fc1 and the logits (nccl_beside: the GEMM's
// blocks fill the SMs NCCL's kernel leaves while it runs, all of them after; with
// a GEMM of G on `units` SMs and a collective of C on num_sm, the work conserved:
// max(C, G + C * num_sm / units)).
TpOverlap async_backward_overlap(const TpAsyncBackward& async);

// The overlapped time of a GEMM of gemm_ns and a collective of comm_ns; an
// nccl_beside entry with num_sm 0 takes comm_channels SMs.
TimeNs overlapped_ns(const TpOverlapGemm& g, TimeNs gemm_ns, TimeNs comm_ns, int tp, int units,
                     int comm_channels = 0);

}  // namespace strata::sim
