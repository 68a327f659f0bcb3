// Max-min fair sharing of link bandwidth among concurrent flows, for the event
// engine: it adds and removes flows as transfers start and end, and asks which
// rates changed.
//
// The allocation (progressive filling, Bertsekas & Gallager, "Data Networks",
// 2nd ed., section 6.5.2): every flow's rate r_f satisfies
//   sum over flows f on link l of r_f <= capacity_l          (for every link l)
//   r_f <= cap_f                                              (the flow's own cap)
// and each flow is either at its cap or crosses a saturated link on which no
// other flow is faster (its bottleneck). Equivalently: raise all rates together,
// freeze a flow when it reaches its cap or one of its links fills, repeat.
//
// Weighted flows: a flow may load each link of its path with a weight w > 0 times
// its rate (the sum becomes sum of w_{f,l} r_f <= capacity_l). One flow then
// stands for a collective whose links carry different shares of its bytes (a
// ring's NVLink hops carry all of them, its NIC hops a part); rates are still
// raised together, so max-min fairness is over the flows' rates. Weight 1 on
// every link is the plain flow, with bit-identical results.
//
// Incremental update: a change can only move flows whose bottleneck it touches.
// add() first tries the cases that need no re-solve (the new flow is capped below
// every residual on its path, or it fills a link where no other flow is faster);
// remove() needs none when no other flow was bottlenecked on a full link of it.
// Otherwise only the affected flows are re-solved: the new flows, or those
// bottlenecked beside the removed one, widened to every outside flow whose
// bottleneck the new solution disturbs (see resolve). Flows elsewhere keep their
// rates. add_all() and remove_all() apply a whole collective's flows with one
// re-solve instead of one per flow. A re-solve works on classes of links that
// carry the same re-solved flows with the same weights (a data-parallel ring's
// part crosses hundreds of links, which fall into a few classes): sums are taken
// per class and progressive filling visits each class's tightest link only,
// with rates bit-identical to a per-link solve.
//
// Link groups: the links that carry exactly the same live flows with the same
// weights, and have the same capacity, carry the same load and fill together, so
// the solver works on such groups, never on single links: a flow's path is the
// list of groups its links fall in, kept as flows start and end (a data-parallel
// ring's part crosses hundreds of links but, at any moment, a few dozen groups).
// A group stands for its links exactly: the same load, the same room, full when
// they are. (Its load is one running sum where each link kept its own, so rates
// equal a per-link solve's up to rounding.)
//
// Not thread-safe: one engine owns one FlowSharing.
#pragma once

#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "core/flat_id_map.h"
#include "topologies/topology.h"

namespace strata::topo {

class FlowSharing {
 public:
  using FlowId = std::int64_t;
  static constexpr double kNoCap = std::numeric_limits<double>::infinity();

  // Link capacities are the topology's achievable link bandwidths.
  explicit FlowSharing(const Topology& topology);
  // Explicit capacities (bytes/s per LinkId), for tests and custom models.
  explicit FlowSharing(std::vector<double> capacities_bytes_per_s);

  // A flow over `path`, never faster than rate_cap (bytes/s, > 0; kNoCap for none;
  // e.g. a protocol's cap). The path may be empty only with a finite cap. Returns a
  // handle that stays unique for this object's lifetime. Throws InternalError for
  // link ids out of range or a non-positive cap.
  FlowId add(const std::vector<LinkId>& path, double rate_cap_bytes_per_s);
  // A weighted flow: at rate r it puts weights[i] * r on path[i] (weights > 0, one
  // per link; empty: all 1). Throws InternalError for a size mismatch or a weight
  // that is not positive and finite.
  FlowId add(const std::vector<LinkId>& path, double rate_cap_bytes_per_s, const std::vector<double>& weights);
  // Several flows starting together (a collective's flows): the same as add() for
  // each, but re-solved once. paths and caps have one entry per flow, weights one
  // per flow or none (all 1); ids come back in the same order.
  std::vector<FlowId> add_all(const std::vector<std::vector<LinkId>>& paths,
                              const std::vector<double>& rate_caps_bytes_per_s,
                              const std::vector<std::vector<double>>& weights = {});
  // The same over paths and weights held elsewhere (the engine's costed
  // collectives), without copying them first; a weights entry may be empty (all 1).
  std::vector<FlowId> add_all_by_pointer(const std::vector<const std::vector<LinkId>*>& paths,
                                         const std::vector<double>& rate_caps_bytes_per_s,
                                         const std::vector<const std::vector<double>*>& weights);
  // Removes a live flow; its bandwidth goes to the others. Throws InternalError for
  // an unknown or already removed id.
  void remove(FlowId id);
  // Several flows ending together, re-solved once.
  void remove_all(const std::vector<FlowId>& ids);
  // Current rate in bytes/s of a live flow. Throws InternalError for unknown ids.
  double rate(FlowId id) const;
  // Live flows whose rate changed since the last call (added ones included, removed
  // ones not), sorted by id; clears the list.
  std::vector<FlowId> take_changed();

  // Re-solves of at most this many flows find progressive filling's next event by
  // scanning their links, larger ones with a heap; both give bit-identical rates
  // (the tests set it to compare them).
  static constexpr int kScanFillMaxFlows = 64;
  void set_scan_fill_max_flows(int flows) { scan_fill_max_flows_ = flows; }

  int live_flows() const { return live_; }
  // The link groups that carry flows now (see "Link groups" above).
  int live_groups() const { return static_cast<int>(capacity_.size() - free_groups_.size()); }
  // Flows re-solved by the last add/remove (0 when a fast path applied): a measure
  // of how local the incremental update was.
  int last_resolved_flows() const { return last_resolved_; }
  // Times the last re-solve widened its set of flows and solved again (0: fast path).
  int last_resolve_rounds() const { return last_resolved_ > 0 ? last_rounds_ : 0; }

 private:
  struct Flow {
    std::vector<LinkId> links;        // the links it crosses, as given
    std::vector<double> link_weight;  // per link; empty: all 1
    // The groups its links fall in (see "Link groups" above), each once, with the
    // flow's weight there; the solver's view of its path.
    std::vector<int> path;
    std::vector<double> weight;
    double w(std::size_t i) const { return weight[i]; }
    std::vector<int> position;  // index of this flow's entry in link_flows_[path[i]]
    double cap = kNoCap;
    double rate = 0.0;
    std::uint32_t generation = 0;
    bool live = false;
    bool changed = false;
  };

  int slot_of(FlowId id) const;
  // Throws InternalError for a bad flow, before anything changes (a link twice
  // included: a group holds each flow once).
  void check_new_flow(const std::vector<LinkId>& path, double cap, const std::vector<double>& weights);
  // Takes a slot for a new flow at rate 0 and attaches it to its links.
  int start_flow(const std::vector<LinkId>& path, double cap, const std::vector<double>& weights);
  // Detaches a live flow and frees its slot.
  void end_flow(int slot);
  FlowId id_of(int slot) const;
  // Moves the flow's links into the groups that now hold them (attach: each link's
  // group plus this flow; detach: less it) and fixes the paths of the flows there.
  void attach(int slot);
  void detach(int slot);
  // A new group of one capacity, registered under its signature (sig).
  int new_group(double capacity, std::uint64_t sig, double load);
  // Adds the flow to the group, at the end of its path.
  void join(int group, int slot, double weight);
  // Drops a group that holds no links from its flows' paths and frees its id.
  void destroy_group(int group);
  // The group's entry in its signature's chain (group_by_sig_, group_next_same_sig_).
  void link_sig(int group);
  void unlink_sig(int group);
  // Before an attach or detach: how many of the flow's links each group holds and
  // with which weight (cover_*; -1: several), and, for a detach, where each group
  // is in the flow's path.
  void count_cover(int slot, bool with_hops);
  // Every link of the group is one of the flow's, all with this weight.
  bool covers(int group, double weight) const;
  // The group's flows changed in place: its new signature; no parent link holds.
  void renew(int group, std::uint64_t sig);
  // Takes the detaching flow out of a group it covers, the group keeping its id.
  void leave_in_place(int group, int slot, double weight);
  // The live group with this signature, capacity and flows (those of `group` less
  // `slot`), or -1.
  int find_group(std::uint64_t sig, double capacity, int group, int slot);
  bool saturated(int group) const;
  void set_rate(int slot, double rate);
  // Re-solves from these flows, widening to every flow the change can move (see the .cc).
  void resolve(const std::vector<int>& seed_flows);
  // The live flows, besides `leaving`, bottlenecked on a full link of theirs:
  // those a removal of `leaving` can speed up.
  std::vector<int> bottlenecked_beside(const std::vector<int>& leaving);
  // Whether the live flow is the fastest on a full link that no flow of the
  // change crosses (none marked in link_epoch_): its rate stays max-min fair.
  bool held_elsewhere(int slot) const;
  // Rule (a) of resolve on S's full link `local` (group `group`): the level at
  // which the S flows held there meet the outside flows faster than them, once
  // those give way and every other flow keeps its rate.
  double level_where_faster_give_way(int group, int local, const std::vector<double>& new_rate,
                                     const std::vector<int>& bottleneck);
  // Starts a new stamp for the scratch marks.
  void next_epoch();
  // Progressive filling of the affected flows over the capacity left to them; each
  // flow's bottleneck: the local link that froze it, or -1 (its cap).
  void fill(const std::vector<double>& avail, std::vector<double>& new_rate, std::vector<int>& bottleneck);
  // Partitions S's links into classes that carry the same S flows with the same
  // weights, refining with the flows added since the last round (see the .cc):
  // raw_class_of_link_ and the room (scratch_avail_) of each link that moved, each
  // class's tightest link; then this round's numbering of the classes that hold
  // links (class_raw_, class_offset_/class_member_/class_member_weight_, their
  // tightest links and S loads) and each flow's classes (flow_class_offset_/...).
  void refine_classes();

  std::vector<double> link_capacity_;  // per LinkId
  std::vector<int> group_of_link_;     // per LinkId: its group, -1 while it carries no flow
  // Per group (the solver's "links"; ids reused): its capacity, its load (sum of
  // weight x rate), its flows (the slot and the group's index in that flow's path,
  // so that moving an entry updates it in O(1)), how many links it holds, and its
  // signature (capacity and flows hashed; equal sets, equal signatures).
  std::vector<double> capacity_;
  std::vector<double> load_;
  struct OnLink {
    int slot;
    int hop;
  };
  std::vector<std::vector<OnLink>> link_flows_;
  std::vector<int> group_links_;
  std::vector<std::uint64_t> group_sig_;
  std::vector<int> free_groups_;
  FlatIdMap group_by_sig_;  // signature -> the first group with it
  std::vector<int> group_next_same_sig_;                 // then the others (a hash collision)
  // A group made by a flow's attach is its parent plus that flow; the flow's detach
  // then finds the parent at once while it lives (the serial tells a reused id).
  std::vector<FlowId> group_made_by_;
  std::vector<int> group_parent_;
  std::vector<std::uint64_t> group_serial_, group_parent_serial_;
  std::uint64_t next_serial_ = 0;
  // attach/detach scratch: per group stamped this call, where its links go (for
  // attach, a list per weight and, for links without flows, per capacity).
  struct Split {
    int from;
    double weight;
    double capacity;
    int to;
    int next;
  };
  std::vector<Split> splits_;
  std::vector<std::uint32_t> split_epoch_;
  std::vector<int> split_head_;
  std::uint32_t split_stamp_ = 0;
  std::vector<int> emptied_groups_;
  // count_cover's marks, per group.
  std::vector<std::uint32_t> cover_epoch_;
  std::vector<int> cover_links_;
  std::vector<double> cover_weight_;
  std::vector<int> cover_hop_;
  std::uint32_t cover_stamp_ = 0;
  std::vector<std::uint32_t> link_seen_;  // check_new_flow's repeat check
  std::uint32_t seen_stamp_ = 0;
  std::vector<std::uint32_t> member_mark_;  // per slot, for find_group
  std::vector<double> member_weight_;
  std::uint32_t member_stamp_ = 0;
  std::vector<Flow> flows_;
  std::vector<int> free_slots_;
  std::vector<int> changed_;
  int live_ = 0;
  int last_resolved_ = 0;
  int last_rounds_ = 0;

  // Scratch for component solves (epoch-stamped to avoid clearing).
  std::vector<std::uint32_t> link_epoch_;
  std::vector<int> link_local_;
  std::vector<std::uint32_t> flow_epoch_;
  std::vector<int> flow_local_;
  struct FillEvent {
    double level;
    int kind;   // 0: a link fills, 1: a flow reaches its cap
    int index;  // local link or local flow
    std::uint32_t version;
    bool operator>(const FillEvent& o) const {
      if (level != o.level) return level > o.level;
      if (kind != o.kind) return kind > o.kind;
      return index > o.index;
    }
  };
  std::vector<int> scratch_flows_;
  std::vector<LinkId> scratch_links_;
  std::vector<double> scratch_capacity_, scratch_load_;
  std::vector<char> scratch_full_;
  std::vector<double> scratch_rate_, scratch_avail_, scratch_new_, scratch_frozen_;
  std::vector<int> scratch_unfrozen_, scratch_cursor_;
  std::vector<double> scratch_unfrozen_weight_;
  std::vector<int> scratch_bottleneck_;
  std::vector<double> scratch_fastest_bound_, scratch_fastest_new_;
  std::vector<std::uint32_t> scratch_version_;
  std::vector<char> scratch_done_;
  std::vector<FillEvent> scratch_heap_;
  std::vector<int> scratch_active_;
  std::vector<int> scratch_fired_;
  std::vector<double> scratch_level_;  // per link of S where rule (a) fired: its give-way level
  std::vector<std::pair<double, double>> scratch_outside_;  // (rate, weight), level_where_faster_give_way
  // refine_classes's partition of S's links: a class is its parent's links that the
  // flow `flow` crosses with weight `weight` (the root, 0, has no flow). Per class:
  // its links (a list through link_next_/link_prev_), the tightest of them, its
  // flows (members_begin.. in class_pool_*) and their S load before the re-solve.
  struct LinkClass {
    int parent = -1;
    int flow = -1;
    double weight = 0.0;
    int split_flow = -1;   // the flow whose children first_child lists
    int first_child = -1;
    int next_sibling = -1;
    int head = -1;         // its first link
    int links = 0;
    int tightest = -1;
    double min_capacity = 0.0;  // the least capacity among its links
    int members_begin = 0;
    int members = 0;
    double in_s_old = 0.0;
    double fastest_old = 0.0;
  };
  std::vector<LinkClass> classes_;
  std::vector<int> class_pool_flow_;
  std::vector<double> class_pool_weight_;
  std::vector<int> raw_class_of_link_;  // per local link: its class in classes_
  std::vector<int> link_next_, link_prev_;
  std::size_t classified_flows_ = 0;    // S's flows that classes_ has seen
  std::vector<int> scratch_rescan_, scratch_candidates_;
  // This round's classes (those holding links), numbered 0..: each one's raw id,
  // flows and weights (class_offset_/class_member_/class_member_weight_), tightest
  // link and S load before; each flow's classes (flow_class_offset_/...).
  std::vector<int> compact_of_raw_, class_raw_, class_offset_, class_member_, class_tightest_;
  std::vector<double> class_member_weight_, class_in_s_old_, class_fastest_old_, class_min_capacity_;
  std::vector<int> flow_class_offset_, flow_class_;
  std::vector<double> flow_class_weight_;
  int scan_fill_max_flows_ = kScanFillMaxFlows;
  std::uint32_t epoch_ = 0;
};

}  // namespace strata::topo
