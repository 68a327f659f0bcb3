// Point-to-point links between pipeline stages: activations flow from pipeline
// rank r to r+1 (and, with virtual stages, from the last rank back to the
// first; under zb-v's V back up from r+1 to r), gradients the other way. A
// stage whose neighbour is on its own rank (the bottom of the V) has no link:
// the executor hands the tensor over itself.
//
// Each direction of each link is a two-rank communicator of its own (sender
// rank 0, receiver rank 1). NCCL matches sends and receives between two ranks
// in posting order and runs them on the communicator's stream, so a send
// waiting for its receiver would block any receive queued behind it on a shared
// communicator; with one communicator per direction, a link only ever queues
// transfers the receiver takes in the same order the sender makes them
// (checked when the links are built). MPI matches the same way and also gets a tag.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/comm/communicator.h"
#include "plan/pipeline_schedule.h"
#include "plan/plan_spec.h"

namespace strata::rt {

enum class LinkKind { kActivations, kGradients };

// One transfer between virtual stages: the micro-batch and the virtual stage it goes to.
struct Transfer {
  int microbatch = 0;
  int to_virtual_stage = 0;
  bool operator==(const Transfer&) const = default;
};

// The transfers from pipeline rank `from` to `to` of a kind, in the order the
// sender's program makes them (sender) or the receiver's program needs them.
std::vector<Transfer> sent_transfers(const PlanSpec& plan, LinkKind kind, int from, int to);
std::vector<Transfer> received_transfers(const PlanSpec& plan, LinkKind kind, int from, int to);

// One id per pipeline transfer in the whole job, computed alike by its sender and
// its receiver so that the measured trace can draw it as a flow: the pipeline
// (its ranks' tp, cp and dp coordinates), the kind, the micro-batch and the
// virtual stage that sends it.
std::int64_t pipeline_transfer_id(const PlanSpec& plan, int tp_rank, int cp_rank, int dp_rank, LinkKind kind,
                                  int microbatch, int from_vs);

class PipelineLinks {
 public:
  // Collective over the pipeline group pp (pp->rank() is the pipeline rank).
  // Throws InternalError if a link's send and receive orders differ (a schedule bug).
  PipelineLinks(Communicator& pp, const PlanSpec& plan);

  // Starts sending x (this rank's output of virtual stage `from_vs` for micro-batch mb).
  std::unique_ptr<Request> start_send(LinkKind kind, const TensorView& x, int microbatch, int from_vs);
  // Starts receiving the input of virtual stage `to_vs` for micro-batch mb into x.
  std::unique_ptr<Request> start_recv(LinkKind kind, const TensorView& x, int microbatch, int to_vs);

 private:
  Communicator* link(LinkKind kind, int from, int to) const;
  int tag(int microbatch, int to_vs) const;

  PlanSpec plan_;
  int rank_ = 0;
  struct Edge {
    LinkKind kind;
    int from;
    int to;
    std::unique_ptr<Communicator> comm;  // null when this rank is not on it
  };
  std::vector<Edge> edges_;
};

}  // namespace strata::rt
