// Human-readable numbers for command output.
#pragma once

#include <string>

namespace strata::cli {

std::string gib(double bytes);          // "61.2 GiB"
std::string count(double n);            // "174.6 B", "6.7 M"
std::string seconds(double s);          // "13.75 s", "812 ms", "35 us"

}  // namespace strata::cli
