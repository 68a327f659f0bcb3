#include "core/memory_budget.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "core/error.h"

namespace strata {

std::uint64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page);
}

namespace {

// STRATA_MEMORY_BUDGET_GIB, or 0 when unset.
double budget_from_environment() {
  const char* v = std::getenv("STRATA_MEMORY_BUDGET_GIB");
  if (v == nullptr || *v == '\0') return 0.0;
  char* end = nullptr;
  const double gib = std::strtod(v, &end);
  if (*end != '\0' || !std::isfinite(gib) || gib <= 0) {
    throw InputError("", "STRATA_MEMORY_BUDGET_GIB",
                     fmt::format("\"{}\" is not a positive number of GiB (the memory one command may plan to use)", v));
  }
  return gib * double(1ull << 30);
}

}  // namespace

double memory_budget_bytes() {
  if (const double from_env = budget_from_environment(); from_env > 0) return from_env;
  const std::uint64_t physical = physical_memory_bytes();
  return physical > 0 ? 0.5 * static_cast<double>(physical) : 64.0 * (1ull << 30);
}

const char* memory_budget_words() {
  static const std::string words = [] {
    const double gib = double(1ull << 30);
    if (budget_from_environment() > 0) return fmt::format("{:.1f} GiB (STRATA_MEMORY_BUDGET_GIB)", memory_budget_bytes() / gib);
    const std::uint64_t physical = physical_memory_bytes();
    return physical > 0 ? fmt::format("{:.1f} GiB (half of this machine's {:.1f} GiB)", memory_budget_bytes() / gib,
                                      static_cast<double>(physical) / gib)
                        : fmt::format("{:.1f} GiB (this machine's memory is unknown)", memory_budget_bytes() / gib);
  }();
  return words.c_str();
}

}  // namespace strata
