#include "cli/format.h"

#include <cmath>

#include <fmt/format.h>

namespace strata::cli {

std::string gib(double bytes) { return fmt::format("{:.2f} GiB", bytes / (1024.0 * 1024.0 * 1024.0)); }

std::string count(double n) {
  if (std::abs(n) >= 1e12) return fmt::format("{:.2f} T", n / 1e12);
  if (std::abs(n) >= 1e9) return fmt::format("{:.2f} B", n / 1e9);
  if (std::abs(n) >= 1e6) return fmt::format("{:.2f} M", n / 1e6);
  if (std::abs(n) >= 1e3) return fmt::format("{:.2f} K", n / 1e3);
  return fmt::format("{:.0f}", n);
}

std::string seconds(double s) {
  if (s >= 1.0) return fmt::format("{:.3f} s", s);
  if (s >= 1e-3) return fmt::format("{:.3f} ms", s * 1e3);
  return fmt::format("{:.1f} us", s * 1e6);
}

}  // namespace strata::cli
