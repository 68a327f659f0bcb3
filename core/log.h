// Logging goes through spdlog to stderr, so stdout carries only a command's
// answer (tables, JSON) and can be piped.
#pragma once

#include <spdlog/spdlog.h>

namespace strata {

// Sets up the stderr logger. verbosity: -1 quiet (errors only), 0 warnings and
// info (default), 1 debug, 2 trace.
void init_logging(int verbosity);

}  // namespace strata
