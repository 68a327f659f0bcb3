// Units used across Strata. Time is kept as integer nanoseconds everywhere the
// simulator orders events (so ties are exact and runs are deterministic);
// rates and sizes are doubles with the unit in the name.
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

// Gigabits per second (network datasheets) to bytes per second.
inline constexpr double gbps_to_bytes_per_s(double gbps) { return gbps * 1e9 / 8.0; }

}  // namespace strata
