#include "core/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace strata {

void init_logging(int verbosity) {
  auto logger = spdlog::get("strata");
  if (!logger) {
    logger = spdlog::stderr_color_mt("strata");
    spdlog::set_default_logger(logger);
  }
  spdlog::set_pattern("%^%l%$: %v");
  switch (verbosity) {
    case -1: spdlog::set_level(spdlog::level::err); break;
    case 0: spdlog::set_level(spdlog::level::info); break;
    case 1: spdlog::set_level(spdlog::level::debug); break;
    default: spdlog::set_level(spdlog::level::trace); break;
  }
}

}  // namespace strata
