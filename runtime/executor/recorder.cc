#include "runtime/executor/recorder.h"

namespace strata::rt {

Recorder::Recorder(Device& device)
    : device_(device), device_timing_(device.backend() != Backend::kCpu) {
  if (device_timing_) step_start_event_ = device_.create_event();
}

Recorder::~Recorder() = default;

void Recorder::begin_step() {
  device_.synchronize();
  current_.clear();
  pending_.clear();
  pool_used_ = 0;
  if (device_timing_) device_.record(*step_start_event_);
  step_start_ = std::chrono::steady_clock::now();
}

void Recorder::end_step() {
  device_.synchronize();
  if (device_timing_) {
    for (const Pending& p : pending_) {
      const TimeNs start = device_.elapsed(*step_start_event_, *event_pool_[p.event_index]).ns();
      const TimeNs end = device_.elapsed(*step_start_event_, *event_pool_[p.event_index + 1]).ns();
      current_[p.slot].start_ns = start;
      current_[p.slot].duration_ns = end - start;
    }
    pending_.clear();
  }
  last_ = std::move(current_);
  current_.clear();
}

TimeNs Recorder::now_ns() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - step_start_)
      .count();
}

std::int32_t Recorder::intern(std::string_view name) {
  auto it = name_ids_.find(std::string(name));
  if (it != name_ids_.end()) return it->second;
  const auto id = static_cast<std::int32_t>(names_.size());
  names_.emplace_back(name);
  name_ids_.emplace(std::string(name), id);
  return id;
}

void Recorder::add(std::string_view name, EventCategory category, Lane lane, double bytes, TimeNs start_ns,
                   TimeNs end_ns, const EventContext& context, std::int64_t transfer) {
  MeasuredEvent e;
  e.name = intern(name);
  e.category = category;
  e.lane = lane;
  e.phase = context.phase;
  e.microbatch = context.microbatch;
  e.layer = context.layer;
  e.chunk = context.chunk;
  e.bytes = bytes;
  e.start_ns = start_ns;
  e.duration_ns = end_ns > start_ns ? end_ns - start_ns : 0;
  e.transfer = transfer;
  current_.push_back(e);
}

std::size_t Recorder::begin_compute() {
  if (!device_timing_) {
    compute_start_ns_ = now_ns();
    return 0;
  }
  while (event_pool_.size() < pool_used_ + 2) event_pool_.push_back(device_.create_event());
  const std::size_t index = pool_used_;
  pool_used_ += 2;
  device_.record(*event_pool_[index]);
  return index;
}

void Recorder::end_compute(std::size_t token, std::string_view name, EventCategory category, double flops,
                           double bytes) {
  MeasuredEvent e;
  // The simulator's names: a recomputed op is "recompute <op>".
  e.name = context_.phase == EventPhase::kRecompute ? intern("recompute " + std::string(name)) : intern(name);
  e.category = category;
  e.lane = Lane::kCompute;
  e.phase = context_.phase;
  e.microbatch = context_.microbatch;
  e.layer = context_.layer;
  e.chunk = context_.chunk;
  e.flops = flops;
  e.bytes = bytes;
  if (device_timing_) {
    device_.record(*event_pool_[token + 1]);
    pending_.push_back({token, current_.size()});
  } else {
    e.start_ns = compute_start_ns_;
    e.duration_ns = now_ns() - compute_start_ns_;
  }
  current_.push_back(e);
}

}  // namespace strata::rt
