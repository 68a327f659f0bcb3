#include "cli/validators.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

namespace strata::cli {

CLI::Validator finite_in(double lo, double hi) {
  const std::string range = fmt::format("{:g} to {:g}", lo, hi);
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        const char* begin = text.c_str();
        char* end = nullptr;
        errno = 0;
        const double v = std::strtod(begin, &end);
        if (end == begin || *end != '\0') return fmt::format("\"{}\" is not a number", text);
        if (!std::isfinite(v) || errno == ERANGE) return fmt::format("{} is not a finite number (allowed: {})", text, range);
        if (v < lo || v > hi) return fmt::format("{} is outside {}", text, range);
        return {};
      },
      "NUMBER in [" + range + "]");
}

}  // namespace strata::cli
