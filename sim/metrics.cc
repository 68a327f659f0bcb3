#include "sim/metrics.h"

#include <algorithm>
#include <tuple>
#include <utility>

namespace strata::sim {
namespace {

int kind_of(Category c) {
  switch (c) {
    case Category::kTp: return static_cast<int>(CommKind::kTp);
    case Category::kCp: return static_cast<int>(CommKind::kCp);
    case Category::kEp: return static_cast<int>(CommKind::kEp);
    case Category::kPp: return static_cast<int>(CommKind::kPp);
    case Category::kDp: return static_cast<int>(CommKind::kDp);
    case Category::kZero: return static_cast<int>(CommKind::kZero);
    case Category::kCopy: return static_cast<int>(CommKind::kOffload);
    default: return -1;
  }
}

}  // namespace

const char* to_string(CommKind k) {
  switch (k) {
    case CommKind::kTp: return "tp";
    case CommKind::kPp: return "pp";
    case CommKind::kDp: return "dp";
    case CommKind::kZero: return "zero";
    case CommKind::kOffload: return "offload";
    case CommKind::kCp: return "cp";
    case CommKind::kEp: return "ep";
  }
  return "tp";
}

namespace {

// A disjoint, sorted set of time intervals: what the tail of a rank's step has
// already attributed, so that no instant counts twice.
class ClaimedTime {
 public:
  // Calls piece(a, b) for each part of [from, until) not yet claimed, in order.
  template <typename Fn>
  void for_each_free(TimeNs from, TimeNs until, Fn&& piece) const {
    for (const auto& [c0, c1] : intervals_) {
      if (c1 <= from) continue;
      if (c0 >= until) break;
      if (c0 > from) piece(from, c0);
      from = std::max(from, c1);
    }
    if (until > from) piece(from, until);
  }
  void claim(TimeNs from, TimeNs until) {
    intervals_.emplace_back(from, until);
    std::sort(intervals_.begin(), intervals_.end());
    std::vector<std::pair<TimeNs, TimeNs>> merged;
    for (const auto& iv : intervals_) {
      if (!merged.empty() && iv.first <= merged.back().second) {
        merged.back().second = std::max(merged.back().second, iv.second);
      } else {
        merged.push_back(iv);
      }
    }
    intervals_ = std::move(merged);
  }

 private:
  std::vector<std::pair<TimeNs, TimeNs>> intervals_;
};

// The step's time, and each rank's window start: the whole makespan from 0, or,
// when ranks start the next step alone, the steady-state period from the rank's
// first compute (its earlier waiting overlaps the previous step) to its last task.
TimeNs step_window(const Workload& w, const RunResult& run, std::vector<TimeNs>* window_start) {
  const TaskGraph& g = w.graph;
  const int n = g.num_ranks();
  if (window_start) window_start->assign(static_cast<std::size_t>(n), 0);
  if (!w.ranks_start_next_step_alone) return run.makespan_ns;
  TimeNs period = 0;
  for (int r = 0; r < n; ++r) {
    TimeNs first = run.makespan_ns, last = 0;
    for (TaskId t : w.stream(r, StreamKind::kCompute)) first = std::min(first, run.start_ns[t]);
    for (int s = 0; s < kNumStreamKinds; ++s) {
      for (TaskId t : g.stream(r, s)) last = std::max(last, run.end_ns[t]);
    }
    const TimeNs start = first < last ? first : 0;
    if (window_start) (*window_start)[static_cast<std::size_t>(r)] = start;
    period = std::max(period, last - start);
  }
  return period;
}

// step_metrics and compute_stream_waits in one pass: the sums are the metrics;
// when waits is given, the pieces they add are recorded too.
StepMetrics account(const Workload& w, const RunResult& run, std::vector<std::vector<ComputeWait>>* waits) {
  const TaskGraph& g = w.graph;
  const TaskAnnotations& notes = w.notes;
  StepMetrics out;
  const int n = g.num_ranks();
  out.ranks.resize(n);
  if (waits) waits->assign(n, {});
  std::vector<TimeNs> window_start;  // each rank's window is [start, start + makespan)
  const TimeNs makespan = step_window(w, run, &window_start);
  out.step_time_s = ns_to_seconds(makespan);

  auto category = [&](TaskId t) { return notes.label_of_task(t).category; };
  const bool one_stage = std::all_of(w.stage.begin(), w.stage.end(), [](int s) { return s == 0; });
  auto kind = [&](TaskId t) { return kind_of(category(t)); };
  auto comm_category = [](int k) {
    constexpr Category kCategoryOf[kNumCommKinds] = {Category::kTp,   Category::kPp, Category::kDp, Category::kZero,
                                                     Category::kCopy, Category::kCp, Category::kEp};
    return kCategoryOf[k];
  };

  for (int r = 0; r < n; ++r) {
    RankMetrics& rm = out.ranks[r];
    auto record = [&](TimeNs from, TimeNs until, Category why, TaskId blocker) {
      if (waits && until > from) (*waits)[r].push_back(ComputeWait{from, until, why, blocker});
    };
    // Attributes the gap [from, until) before a task blocked by `blocker`.
    auto attribute = [&](TimeNs from, TimeNs until, TaskId blocker) {
      bool pipeline = blocker < 0;
      TaskId peer = -1;  // a slower rank of this stage's compute the chain ends at
      int last_kind = -1;
      TaskId last_blocker = -1;
      TaskId b = blocker;
      while (b >= 0 && until > from) {
        const int k = kind(b);
        if (category(b) == Category::kHost) {
          // The GPU waits for the host to issue the kernel (dispatch-bound). Host
          // tasks wait for nothing but each other, so the host was busy all along.
          rm.host_s += ns_to_seconds(until - from);
          record(from, until, Category::kHost, b);
          until = from;
          break;
        }
        if (k < 0) {
          // The chain ends at compute: another rank's — of another stage (pipeline
          // bubble), or of this stage, reached without a pipeline transfer (a
          // slower peer) — or this rank's own work on another stream.
          if (!g.runs_on(b, r)) {
            const int other = g.rank_of_slot(*g.slots_begin(b));
            if (!pipeline && w.stage[other] == w.stage[r]) {
              peer = b;
            } else {
              pipeline = true;
            }
          }
          break;
        }
        if (k == static_cast<int>(CommKind::kPp)) pipeline = true;
        const TimeNs begin = std::max(from, run.start_ns[b]);
        if (until > begin) {
          rm.exposed_s[k] += ns_to_seconds(until - begin);
          record(begin, until, comm_category(k), b);
        }
        until = std::min(until, begin);
        last_kind = k;
        last_blocker = b;
        b = run.blocker[b];
        if (b < 0) pipeline = true;  // the chain starts at the step's start
      }
      if (until > from) {
        if (peer >= 0) {
          rm.peer_wait_s += ns_to_seconds(until - from);
          record(from, until, Category::kWait, peer);
        } else if (pipeline || last_kind < 0) {
          rm.bubble_s += ns_to_seconds(until - from);
          record(from, until, Category::kBubble, -1);
        } else {
          rm.exposed_s[last_kind] += ns_to_seconds(until - from);
          record(from, until, comm_category(last_kind), last_blocker);
        }
      }
    };

    const auto& compute = w.stream(r, StreamKind::kCompute);
    const TimeNs origin = window_start[r];
    const TimeNs window_end = origin + makespan;
    TimeNs cursor = origin;
    for (TaskId t : compute) {
      // Collectives collapsed into a block (folded fidelity) run synchronously, as
      // Megatron's do: exposed tensor-, context- or expert-parallel time.
      const std::int32_t detail = notes.info(t).detail;
      const TimeNs comm_ns = detail >= 0 ? notes.detail_comm_ns(detail) : 0;
      rm.compute_s += ns_to_seconds(run.end_ns[t] - run.start_ns[t] - comm_ns);
      if (comm_ns > 0) {
        const TimeNs cp_ns = notes.detail_comm_ns(detail, Category::kCp);
        const TimeNs ep_ns = notes.detail_comm_ns(detail, Category::kEp);
        rm.exposed_s[static_cast<int>(CommKind::kTp)] += ns_to_seconds(comm_ns - cp_ns - ep_ns);
        rm.exposed_s[static_cast<int>(CommKind::kCp)] += ns_to_seconds(cp_ns);
        rm.exposed_s[static_cast<int>(CommKind::kEp)] += ns_to_seconds(ep_ns);
        if (waits) {
          // The block's ops run one after another from its start, as the trace draws them.
          TimeNs at = run.start_ns[t];
          for (const auto& op : notes.detail(detail)) {
            if (is_communication(op.category)) record(at, at + op.duration_ns, op.category, t);
            at += op.duration_ns;
          }
        }
      }
      if (run.start_ns[t] > cursor) attribute(cursor, run.start_ns[t], run.blocker[t]);
      cursor = run.end_ns[t];
    }
    // After the rank's last compute: its own communication still running is exposed;
    // the rest is waiting for the other stages (pipeline flush).
    if (window_end > cursor) {
      struct Busy {
        TimeNs start, end;
        TaskId task;
        bool operator<(const Busy& o) const { return std::tie(start, end, task) < std::tie(o.start, o.end, o.task); }
      };
      std::vector<Busy> busy[kNumCommKinds];
      for (StreamKind s : {StreamKind::kTpComm, StreamKind::kDpComm, StreamKind::kPpSend, StreamKind::kCopy,
                           StreamKind::kDpReduce}) {
        for (TaskId t : w.stream(r, s)) {
          int k = kind(t);
          // The copy lane's own work — an offloaded optimizer's step on the host —
          // is offload too: the GPU waits for it.
          if (k < 0 && s == StreamKind::kCopy) k = static_cast<int>(CommKind::kOffload);
          if (k < 0 || run.end_ns[t] <= cursor) continue;
          busy[k].push_back(Busy{std::max(cursor, run.start_ns[t]), run.end_ns[t], t});
        }
      }
      // Claim time in priority order so no instant counts twice.
      ClaimedTime claimed;
      for (int k : {static_cast<int>(CommKind::kDp), static_cast<int>(CommKind::kZero),
                    static_cast<int>(CommKind::kOffload), static_cast<int>(CommKind::kPp),
                    static_cast<int>(CommKind::kTp), static_cast<int>(CommKind::kCp),
                    static_cast<int>(CommKind::kEp)}) {
        std::sort(busy[k].begin(), busy[k].end());
        TimeNs reach = cursor;
        for (const Busy& a : busy[k]) {
          const TimeNs from = std::max(a.start, reach);
          if (a.end <= from) continue;
          TimeNs free = 0;
          claimed.for_each_free(from, a.end, [&](TimeNs p0, TimeNs p1) {
            free += p1 - p0;
            record(p0, p1, comm_category(k), a.task);
          });
          rm.exposed_s[k] += ns_to_seconds(free);
          claimed.claim(from, a.end);
          reach = a.end;
        }
      }
      // The rest waits for the other ranks to end the step: the other stages'
      // flush, or — with a single stage — slower peers.
      TimeNs flush = 0;
      claimed.for_each_free(cursor, window_end, [&](TimeNs p0, TimeNs p1) {
        flush += p1 - p0;
        record(p0, p1, one_stage ? Category::kWait : Category::kBubble, -1);
      });
      (one_stage ? rm.peer_wait_s : rm.bubble_s) += ns_to_seconds(flush);
    }
    if (waits) {
      auto& mine = (*waits)[r];
      std::sort(mine.begin(), mine.end(), [](const ComputeWait& a, const ComputeWait& b) {
        return std::tie(a.start_ns, a.end_ns) < std::tie(b.start_ns, b.end_ns);
      });
    }
  }

  int max_stage = 0;
  for (int s : w.stage) max_stage = std::max(max_stage, s);
  std::vector<double> bubble_sum(max_stage + 1, 0.0);
  std::vector<int> count(max_stage + 1, 0);
  for (int r = 0; r < n; ++r) {
    bubble_sum[w.stage[r]] += out.ranks[r].bubble_s;
    ++count[w.stage[r]];
    out.compute_s += out.ranks[r].compute_s / n;
    out.host_s += out.ranks[r].host_s / n;
    out.peer_wait_s += out.ranks[r].peer_wait_s / n;
    for (int k = 0; k < kNumCommKinds; ++k) out.exposed_s[k] += out.ranks[r].exposed_s[k] / n;
  }
  for (int s = 0; s <= max_stage; ++s) {
    const double ratio = count[s] > 0 && out.step_time_s > 0 ? bubble_sum[s] / count[s] / out.step_time_s : 0.0;
    out.bubble_ratio_per_stage.push_back(ratio);
    out.bubble_ratio += ratio / (max_stage + 1);
  }
  return out;
}

}  // namespace

StepMetrics step_metrics(const Workload& w, const RunResult& run) { return account(w, run, nullptr); }

double step_time_s(const Workload& w, const RunResult& run) { return ns_to_seconds(step_window(w, run, nullptr)); }

std::vector<std::vector<ComputeWait>> compute_stream_waits(const Workload& w, const RunResult& run) {
  std::vector<std::vector<ComputeWait>> waits;
  account(w, run, &waits);
  return waits;
}

}  // namespace strata::sim
