#include "runtime/executor/pipeline_links.h"

#include <fmt/format.h>

#include "core/error.h"

namespace strata::rt {
namespace {

std::vector<PipelineOp> program_of(const PlanSpec& p, int rank) {
  return pipeline_program(p.schedule, p.pp, p.vpp, p.num_microbatches(), rank);
}

}  // namespace

std::vector<Transfer> sent_transfers(const PlanSpec& p, LinkKind kind, int from, int to) {
  const int last = p.pp * p.vpp - 1;
  std::vector<Transfer> out;
  for (const PipelineOp& op : program_of(p, from)) {
    const int vs = virtual_stage(p, from, op.chunk);
    if (kind == LinkKind::kActivations && op.phase == PipelinePhase::kForward && vs < last &&
        stage_place(p, vs + 1).rank == to) {
      out.push_back({op.microbatch, vs + 1});
    }
    if (kind == LinkKind::kGradients && op.phase == PipelinePhase::kBackward && vs > 0 &&
        stage_place(p, vs - 1).rank == to) {
      out.push_back({op.microbatch, vs - 1});
    }
  }
  return out;
}

std::vector<Transfer> received_transfers(const PlanSpec& p, LinkKind kind, int from, int to) {
  const int last = p.pp * p.vpp - 1;
  std::vector<Transfer> out;
  for (const PipelineOp& op : program_of(p, to)) {
    const int vs = virtual_stage(p, to, op.chunk);
    if (kind == LinkKind::kActivations && op.phase == PipelinePhase::kForward && vs > 0 &&
        stage_place(p, vs - 1).rank == from) {
      out.push_back({op.microbatch, vs});
    }
    if (kind == LinkKind::kGradients && op.phase == PipelinePhase::kBackward && vs < last &&
        stage_place(p, vs + 1).rank == from) {
      out.push_back({op.microbatch, vs});
    }
  }
  return out;
}

std::int64_t pipeline_transfer_id(const PlanSpec& plan, int tp_rank, int cp_rank, int dp_rank, LinkKind kind,
                                  int microbatch, int from_vs) {
  const std::int64_t pipeline = (static_cast<std::int64_t>(dp_rank) * plan.cp + cp_rank) * plan.tp + tp_rank;
  const std::int64_t stages = static_cast<std::int64_t>(plan.pp) * plan.vpp;
  const std::int64_t per_pipeline = 2 * static_cast<std::int64_t>(plan.num_microbatches()) * stages;
  return pipeline * per_pipeline + (static_cast<std::int64_t>(kind == LinkKind::kGradients) * plan.num_microbatches() +
                                    microbatch) * stages + from_vs;
}

PipelineLinks::PipelineLinks(Communicator& pp, const PlanSpec& plan) : plan_(plan), rank_(pp.rank()) {
  if (plan.pp == 1) return;
  // Every directed link that carries something, in a fixed order on every rank.
  for (LinkKind kind : {LinkKind::kActivations, LinkKind::kGradients}) {
    for (int from = 0; from < plan.pp; ++from) {
      for (int to = 0; to < plan.pp; ++to) {
        if (from == to) continue;
        const std::vector<Transfer> sent = sent_transfers(plan, kind, from, to);
        if (sent.empty()) continue;
        if (sent != received_transfers(plan, kind, from, to)) {
          throw InternalError(fmt::format("pipeline schedule: rank {} sends {} to rank {} in an order rank {} does "
                                          "not receive them in",
                                          from, kind == LinkKind::kActivations ? "activations" : "gradients", to, to));
        }
        edges_.push_back({kind, from, to, nullptr});
      }
    }
  }
  // Splits are collective over the pipeline group and give a rank one group
  // each: colour the links into rounds in which no rank is on two links.
  std::vector<std::vector<int>> rounds;
  std::vector<std::vector<char>> busy;
  for (int e = 0; e < static_cast<int>(edges_.size()); ++e) {
    std::size_t r = 0;
    for (; r < rounds.size(); ++r) {
      if (!busy[r][edges_[e].from] && !busy[r][edges_[e].to]) break;
    }
    if (r == rounds.size()) {
      rounds.emplace_back();
      busy.emplace_back(plan.pp, 0);
    }
    rounds[r].push_back(e);
    busy[r][edges_[e].from] = 1;
    busy[r][edges_[e].to] = 1;
  }
  for (const std::vector<int>& round : rounds) {
    int color = -1;
    int key = 0;
    int mine = -1;
    for (int e : round) {
      if (edges_[e].from == rank_ || edges_[e].to == rank_) {
        color = e;
        key = edges_[e].from == rank_ ? 0 : 1;
        mine = e;
      }
    }
    std::unique_ptr<Communicator> comm = pp.split(color, key);
    if (mine >= 0) edges_[mine].comm = std::move(comm);
  }
}

Communicator* PipelineLinks::link(LinkKind kind, int from, int to) const {
  for (const Edge& e : edges_) {
    if (e.kind == kind && e.from == from && e.to == to && e.comm) return e.comm.get();
  }
  throw InternalError(fmt::format("pipeline: no {} link from rank {} to rank {}",
                                  kind == LinkKind::kActivations ? "activation" : "gradient", from, to));
}

int PipelineLinks::tag(int microbatch, int to_vs) const {
  // MPI guarantees tags up to 32767; links also match in posting order.
  return (microbatch * plan_.pp * plan_.vpp + to_vs) % 32768;
}

std::unique_ptr<Request> PipelineLinks::start_send(LinkKind kind, const TensorView& x, int microbatch, int from_vs) {
  const int to_vs = kind == LinkKind::kActivations ? from_vs + 1 : from_vs - 1;
  Communicator* c = link(kind, rank_, stage_place(plan_, to_vs).rank);
  return c->start_send(x, 1, tag(microbatch, to_vs));
}

std::unique_ptr<Request> PipelineLinks::start_recv(LinkKind kind, const TensorView& x, int microbatch, int to_vs) {
  const int from_vs = kind == LinkKind::kActivations ? to_vs - 1 : to_vs + 1;
  Communicator* c = link(kind, stage_place(plan_, from_vs).rank, rank_);
  return c->start_recv(x, 0, tag(microbatch, to_vs));
}

}  // namespace strata::rt
