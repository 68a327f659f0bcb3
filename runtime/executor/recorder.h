// What a rank did during one training step, with when: the measured side of the
// timeline, in the categories, lanes and names the simulator's trace uses
// (docs/formats.md, "trace.json"), so predicted and measured open side by side.
//
// Compute kernels are timed with the device's own clock: on cpu every call
// completes before it returns, so host time around the call is its duration; on
// cuda a pair of device events per kernel, resolved when the step ends.
// Communication is timed on the host, from the call that starts it to the wait
// or test that sees it complete; both clocks count from the step's start.
//
// Thread safety: one Recorder per rank, used by that rank's thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/trace_vocabulary.h"
#include "core/units.h"
#include "runtime/device/device.h"

namespace strata::rt {

// The trace's lanes, categories and phases (core/trace_vocabulary.h), as the
// simulator's traces use them.
using Lane = trace::Lane;
using trace::kNumLanes;
using EventCategory = trace::Category;
using EventPhase = trace::Phase;

struct MeasuredEvent {
  std::int32_t name = 0;  // index into Recorder::names()
  EventCategory category = EventCategory::kGemm;
  Lane lane = Lane::kCompute;
  EventPhase phase = EventPhase::kForward;
  std::int32_t microbatch = -1;
  std::int32_t layer = -1;
  std::int32_t chunk = 0;
  double flops = 0.0;
  double bytes = 0.0;
  TimeNs start_ns = 0;     // since the step's start
  TimeNs duration_ns = 0;
  // A pipeline transfer's id, the same on the sending and the receiving rank
  // (pipeline_transfer_id), which the trace draws as a flow from one to the
  // other; -1 for every other event.
  std::int64_t transfer = -1;
};

// Where in the program the rank is: attached to every event recorded.
struct EventContext {
  std::int32_t microbatch = -1;
  std::int32_t layer = -1;
  std::int32_t chunk = 0;
  EventPhase phase = EventPhase::kForward;
};

class Recorder {
 public:
  explicit Recorder(Device& device);
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Starts a step: events from now count from here. Synchronizes the device.
  void begin_step();
  // Ends the step (synchronizes, resolves device timings); its events replace
  // the previous step's (the trace shows the last step, in steady state).
  void end_step();
  const std::vector<MeasuredEvent>& last_step_events() const { return last_; }
  const std::vector<std::string>& names() const { return names_; }

  EventContext& context() { return context_; }

  // Runs f (device kernels) as one compute event.
  template <typename F>
  void compute(std::string_view name, EventCategory category, double flops, double bytes, F&& f) {
    const std::size_t token = begin_compute();
    f();
    end_compute(token, name, category, flops, bytes);
  }

  // Host time since the step's start.
  TimeNs now_ns() const;
  // A communication (or any host-timed) event on a lane.
  void add(std::string_view name, EventCategory category, Lane lane, double bytes, TimeNs start_ns,
           TimeNs end_ns, const EventContext& context, std::int64_t transfer = -1);
  void add(std::string_view name, EventCategory category, Lane lane, double bytes, TimeNs start_ns,
           TimeNs end_ns) {
    add(name, category, lane, bytes, start_ns, end_ns, context_);
  }

 private:
  std::size_t begin_compute();
  void end_compute(std::size_t token, std::string_view name, EventCategory category, double flops,
                   double bytes);
  std::int32_t intern(std::string_view name);

  Device& device_;
  bool device_timing_;  // cuda: events; cpu: host clock
  std::chrono::steady_clock::time_point step_start_;
  std::unique_ptr<Event> step_start_event_;
  // cuda: events of this step's compute, (start, end) per pending event.
  std::vector<std::unique_ptr<Event>> event_pool_;
  std::size_t pool_used_ = 0;
  struct Pending {
    std::size_t event_index;  // its start event; end is event_index + 1
    std::size_t slot;         // index into current_
  };
  std::vector<Pending> pending_;
  TimeNs compute_start_ns_ = 0;
  std::vector<MeasuredEvent> current_;
  std::vector<MeasuredEvent> last_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, std::int32_t> name_ids_;
  EventContext context_;
};

}  // namespace strata::rt
