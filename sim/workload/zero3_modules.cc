#include "sim/workload/zero3_modules.h"

#include <map>
#include <set>

#include "sim/workload/module_gathers.h"
#include "sim/workload/segments.h"

namespace strata::sim {
namespace {

// A module hook the layer program marked, in execution order.
struct HookAt {
  int op;       // index in the stage's program
  int layer;    // chunk-local layer
  int slot;     // WorkloadBuild::hook_slot
  int module;   // index in layer_parameter_modules
  bool backward;
};

class ModuleZero3 {
 public:
  ModuleZero3(WorkloadBuild& b, int r, const std::vector<int>& members, const Zero3Collectives& c,
              std::vector<TaskId>& last_dp)
      : b_(b),
        p_(b.plan),
        cfg_(*b.options.sharded.module_gather),
        r_(r),
        members_(members),
        c_(c),
        last_dp_(last_dp),
        modules_(layer_parameter_modules(b.model, b.plan)),
        in_flight_(members.size()),
        last_reduce_(members.size(), -1) {}

  void run() {
    collect_hooks();
    const std::vector<HookGathers> plan = plan_module_gathers(trace_, cfg_);
    for (std::size_t k = 0; k < hooks_.size(); ++k) {
      at_hook(k, plan[k]);
      if (hooks_[k].backward) collect_gradients(k);
      const bool op_ends = k + 1 == hooks_.size() || hooks_[k + 1].op != hooks_[k].op;
      if (op_ends && b_.programs[r_][hooks_[k].op].phase == PipelinePhase::kBackward) {
        reduce_bucket([&](std::size_t i) { return b_.op_marks[members_[i]][hooks_[k].op].last; });
      }
    }
  }

 private:
  std::size_t slot_index(int op, int layer, int slot) const {
    return static_cast<std::size_t>((op * b_.chunk_layers() + layer) * b_.hook_slots() + slot);
  }
  int module_id(const HookAt& h) const {
    const int vs = virtual_stage(p_, r_, b_.programs[r_][h.op].chunk);
    return (b_.first_layer_of(vs) + h.layer) * static_cast<int>(modules_.size()) + h.module;
  }

  // The hooks in the order the stage runs them: a forward op's layers, each
  // module in order; a backward op's layers in reverse, each with its
  // recompute's hooks (full recompute) and then its modules' backward hooks in
  // reverse. A hook the layer program did not mark does not fire.
  void collect_hooks() {
    const int n = static_cast<int>(modules_.size());
    const auto& program = b_.programs[r_];
    auto add = [&](int oi, int layer, bool backward, int mod) {
      const int slot = b_.hook_slot(backward, mod);
      if (b_.hook_first[members_.front()][slot_index(oi, layer, slot)] < 0) return;
      hooks_.push_back({oi, layer, slot, mod, backward});
      ModuleUse u;
      u.module = module_id(hooks_.back());
      for (std::int64_t e : modules_[mod].params) {
        u.elements += e;
        if (e >= cfg_.persistence_threshold_elements) u.gathered_elements += e;
      }
      trace_.push_back(u);
    };
    for (std::size_t oi = 0; oi < program.size(); ++oi) {
      const PipelineOp& op = program[oi];
      const int lc = b_.layers_of(virtual_stage(p_, r_, op.chunk));
      const int o = static_cast<int>(oi);
      if (op.phase == PipelinePhase::kForward) {
        for (int j = 0; j < lc; ++j) {
          for (int mod = 0; mod < n; ++mod) add(o, j, false, mod);
        }
      } else if (op.phase == PipelinePhase::kBackward) {
        for (int j = lc - 1; j >= 0; --j) {
          for (int mod = 0; mod < n; ++mod) add(o, j, false, mod);
          for (int mod = n - 1; mod >= 0; --mod) add(o, j, true, mod);
        }
      }
    }
  }

  TaskInfo info_of(const HookAt& h, double bytes) const {
    const PipelineOp& op = b_.programs[r_][h.op];
    TaskInfo info;
    info.microbatch = op.microbatch;
    info.chunk = op.chunk;
    info.layer = b_.first_layer_of(virtual_stage(p_, r_, op.chunk)) + h.layer;
    info.bytes = bytes;
    return info;
  }
  Phase phase_of(const HookAt& h) const {
    return b_.programs[r_][h.op].phase == PipelinePhase::kForward ? Phase::kForward : Phase::kBackward;
  }

  // The copies a list-based collective makes of `bytes`: one kernel per rank, each of its chunk.
  Duration rank_copies(double bytes) const {
    const double n = static_cast<double>(c_.group_size);
    return Duration::from_ns(b_.op_costs.device_copy(bytes / n).ns() * c_.group_size);
  }

  // The task before hook k on member i (-1: none): the previous op's last when
  // the hook opens its op.
  TaskId before_hook(std::size_t k, std::size_t i) const {
    const HookAt& h = hooks_[k];
    const int member = members_[i];
    const TaskId prev = b_.hook_prev[member][slot_index(h.op, h.layer, h.slot)];
    if (prev >= 0 || h.op == 0) return prev;
    return b_.op_marks[member][h.op - 1].last;
  }
  TaskId hook_first(std::size_t k, std::size_t i) const {
    const HookAt& h = hooks_[k];
    return b_.hook_first[members_[i]][slot_index(h.op, h.layer, h.slot)];
  }

  void at_hook(std::size_t k, const HookGathers& g) {
    const HookAt& h = hooks_[k];
    std::vector<std::vector<TaskId>> issued(members_.size());
    for (int m : g.fetched) gather(k, m, issued);
    for (std::size_t i = 0; i < members_.size(); ++i) {
      const TaskId first = hook_first(k, i);
      if (g.waits) {
        for (TaskId t : in_flight_[i]) b_.w.graph.add_dependency(t, first);
        in_flight_[i].clear();
        if (cfg_.synchronize && last_reduce_[i] >= 0) b_.w.graph.add_dependency(last_reduce_[i], first);
      }
      auto own = done_.find(module_id(h));
      if (own != done_.end()) b_.w.graph.add_dependency(own->second[i], first);
    }
    for (int m : g.prefetched) gather(k, m, issued);
    delay_compute_issue(k, issued.front().size());
    if (cfg_.synchronize) {
      // The host waits in each gather's synchronize for the gathers before it.
      for (std::size_t i = 0; i < members_.size(); ++i) {
        for (std::size_t n = 0; n + 1 < issued[i].size(); ++n) b_.w.graph.add_dependency(issued[i][n], hook_first(k, i));
      }
    }
  }

  // The host issues the hook's module's first kernel after the gathers it launched
  // at the hook: with synchronize, only once the GPU's work before the hook is done
  // (it blocked in the first gather's synchronize); and only once it has issued
  // every per-rank copy of the list collectives launched since the last hook (the
  // gathers here, the reduce-scatters of gradients since), copy_issue_us each.
  // (Without host dispatch there is no host lane: both are no-ops.)
  void delay_compute_issue(std::size_t k, std::size_t gathers) {
    const std::size_t calls = gathers + reduces_since_hook_;
    reduces_since_hook_ = 0;
    const bool copies = cfg_.copy_issue_us > 0.0 && cfg_.copy_per_rank && c_.group_size > 1 && calls > 0;
    const Duration extra = copies ? Duration::from_seconds(cfg_.copy_issue_us * 1e-6 * static_cast<double>(calls) *
                                                           c_.group_size)
                                  : Duration{};
    std::set<TaskId> delayed;  // members of a tensor-parallel group share their tasks
    for (std::size_t i = 0; i < members_.size(); ++i) {
      const TaskId first = hook_first(k, i);
      if (first < 0 || !delayed.insert(first).second) continue;
      if (const TaskId before = before_hook(k, i); cfg_.synchronize && gathers > 0 && before >= 0) {
        b_.issue_after(first, before);
      }
      if (copies) b_.delay_issue(first, extra);
    }
  }

  // Module `id`'s partitioned parameters gathered at hook k, one collective each.
  void gather(std::size_t k, int id, std::vector<std::vector<TaskId>>& issued) {
    const HookAt& h = hooks_[k];
    const int mod = id % static_cast<int>(modules_.size());
    const std::int32_t lbl = b_.label("param all_gather", Category::kZero, phase_of(h));
    const std::int32_t lbl_copy = b_.label("param all_gather rank copies", Category::kZero, phase_of(h));
    std::vector<TaskId> done;
    for (std::int64_t e : modules_[mod].params) {
      if (e < cfg_.persistence_threshold_elements) continue;
      const double bytes = static_cast<double>(e) * dtype_bytes(p_.dtype);
      TaskInfo info = info_of(h, bytes);
      info.layer = id / static_cast<int>(modules_.size());
      done = c_.gather(bytes, lbl, info);
      for (std::size_t i = 0; i < members_.size(); ++i) {
        if (cfg_.synchronize) {
          // torch.cuda.synchronize() first: the GPU is idle when the gather starts.
          if (const TaskId before = before_hook(k, i); before >= 0) b_.depend(before, done[i]);
          if (last_reduce_[i] >= 0) b_.w.graph.add_dependency(last_reduce_[i], done[i]);
        }
        if (cfg_.copy_per_rank && c_.group_size > 1) {
          const TaskId copies = b_.compute(members_[i], StreamKind::kDpComm, rank_copies(bytes), lbl_copy, info);
          b_.w.graph.add_dependency(done[i], copies);
          done[i] = copies;
        }
        in_flight_[i].push_back(done[i]);
        issued[i].push_back(done[i]);
      }
    }
    if (!done.empty()) done_[id] = done;
  }

  // Hook k is a module's backward: its gradients join the reduce bucket, which
  // is reduced first when they would overflow it, from the end of the module's
  // stretch (the task before the next hook of the op, or the op's last).
  void collect_gradients(std::size_t k) {
    const HookAt& h = hooks_[k];
    const bool next_in_op = k + 1 < hooks_.size() && hooks_[k + 1].op == h.op;
    auto ready = [&](std::size_t i) {
      return next_in_op ? before_hook(k + 1, i) : b_.op_marks[members_[i]][h.op].last;
    };
    for (std::int64_t e : modules_[h.module].params) {
      if (bucket_elements_ + e > cfg_.reduce_bucket_elements && !bucket_.empty()) reduce_bucket(ready);
      bucket_.push_back({e, info_of(h, 0.0)});
      bucket_elements_ += e;
    }
  }

  // Reduce-scatters every gradient of the bucket, each on its own.
  void reduce_bucket(const std::function<TaskId(std::size_t)>& ready) {
    const std::int32_t lbl_copy = b_.label("grad reduce_scatter rank copies", Category::kDp, Phase::kBackward);
    for (const Pending& g : bucket_) {
      TaskInfo info = g.info;
      info.bytes = static_cast<double>(g.elements) * p_.grad_bytes();
      if (cfg_.copy_per_rank && c_.group_size > 1) {
        for (std::size_t i = 0; i < members_.size(); ++i) {
          const TaskId copies = b_.compute(members_[i], c_.reduce_lane, rank_copies(info.bytes), lbl_copy, info);
          if (const TaskId before = ready(i); before >= 0) b_.depend(before, copies);
        }
      }
      const std::vector<TaskId> done = c_.reduce(info.bytes, info, ready);
      ++reduces_since_hook_;
      for (std::size_t i = 0; i < members_.size(); ++i) {
        last_reduce_[i] = done[i];
        last_dp_[members_[i]] = done[i];
      }
    }
    bucket_.clear();
    bucket_elements_ = 0;
  }

  struct Pending {
    std::int64_t elements;
    TaskInfo info;
  };

  WorkloadBuild& b_;
  const PlanSpec& p_;
  const ModuleGather& cfg_;
  const int r_;
  const std::vector<int>& members_;
  const Zero3Collectives& c_;
  std::vector<TaskId>& last_dp_;
  const std::vector<ParameterModule> modules_;
  std::vector<HookAt> hooks_;
  std::vector<ModuleUse> trace_;
  std::map<int, std::vector<TaskId>> done_;     // module id -> each member's last gather of it
  std::vector<std::vector<TaskId>> in_flight_;  // [member]: gathers not waited for yet
  std::vector<TaskId> last_reduce_;             // [member]: the last reduction issued
  std::vector<Pending> bucket_;
  std::int64_t bucket_elements_ = 0;
  std::size_t reduces_since_hook_ = 0;  // list reduce-scatters whose copies' issue the next hook pays
};

}  // namespace

void add_zero3_by_module(WorkloadBuild& b, int r, const std::vector<int>& members, const Zero3Collectives& c,
                         std::vector<TaskId>& last_dp) {
  if (members.empty()) return;
  ModuleZero3(b, r, members, c, last_dp).run();
}

}  // namespace strata::sim
