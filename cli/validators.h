// Command-line checks for real numbers: CLI11's Range and PositiveNumber let
// "nan" through (every comparison with NaN is false) and print their open
// bound as DBL_MAX's 309 digits.
#pragma once

#include <CLI/CLI.hpp>

namespace strata::cli {

// A finite number in [lo, hi]; the message names the range as the user would write it.
CLI::Validator finite_in(double lo, double hi);

}  // namespace strata::cli
