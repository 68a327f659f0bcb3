// Units used across Strata. Time is kept as integer nanoseconds everywhere the
// simulator orders events (so ties are exact and runs are deterministic);
// rates and sizes are doubles with the unit in the name. Durations handed from
// one part to another (a cost model's op times, a collective's latency, a
// device's measured interval) are a Duration, never a bare number.
#pragma once

#include <cmath>
#include <cstdint>

namespace strata {

// Simulated or measured time in integer nanoseconds.
using TimeNs = std::int64_t;

inline constexpr double kNsPerSecond = 1e9;

inline constexpr double kKiB = 1024.0;
inline constexpr double kMiB = 1024.0 * 1024.0;
inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// Decimal units, as datasheets and the ZeRO paper use them.
inline constexpr double kGB = 1e9;
inline constexpr double kTB = 1e12;

// Seconds to nanoseconds, rounded up so that a non-zero cost never becomes free.
inline TimeNs seconds_to_ns(double seconds) {
  if (seconds <= 0.0) return 0;
  return static_cast<TimeNs>(std::ceil(seconds * kNsPerSecond));
}

inline double ns_to_seconds(TimeNs ns) { return static_cast<double>(ns) / kNsPerSecond; }

// A span of time in integer nanoseconds, with named conversions: what the
// module boundaries pass (costs to the workload, collectives to the engine, a
// device's events to the runtime), so seconds, microseconds and nanoseconds
// cannot be mixed up there. Inside a part, ns() is the count to compute with.
class Duration {
 public:
  constexpr Duration() = default;
  static constexpr Duration from_ns(TimeNs ns) { return Duration(ns); }
  // Rounded up to whole nanoseconds, so a non-zero cost never becomes free; a
  // non-positive time is zero.
  static Duration from_seconds(double seconds) { return Duration(seconds_to_ns(seconds)); }

  constexpr TimeNs ns() const { return ns_; }
  double seconds() const { return ns_to_seconds(ns_); }

  constexpr Duration operator+(Duration o) const { return Duration(ns_ + o.ns_); }
  constexpr Duration operator-(Duration o) const { return Duration(ns_ - o.ns_); }
  constexpr Duration& operator+=(Duration o) {
    ns_ += o.ns_;
    return *this;
  }
  constexpr Duration operator*(std::int64_t k) const { return Duration(ns_ * k); }
  // Spelled out: CUDA sources include this header and compile as C++17.
  constexpr bool operator==(Duration o) const { return ns_ == o.ns_; }
  constexpr bool operator!=(Duration o) const { return ns_ != o.ns_; }
  constexpr bool operator<(Duration o) const { return ns_ < o.ns_; }
  constexpr bool operator<=(Duration o) const { return ns_ <= o.ns_; }
  constexpr bool operator>(Duration o) const { return ns_ > o.ns_; }
  constexpr bool operator>=(Duration o) const { return ns_ >= o.ns_; }

 private:
  constexpr explicit Duration(TimeNs ns) : ns_(ns) {}
  TimeNs ns_ = 0;
};

// Gigabits per second (network datasheets) to bytes per second.
inline constexpr double gbps_to_bytes_per_s(double gbps) { return gbps * 1e9 / 8.0; }

}  // namespace strata
