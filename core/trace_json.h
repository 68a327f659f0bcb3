// Pieces of the Chrome trace event JSON that the simulator's trace
// (sim/trace_writer.cc) and the runtime's measured trace (runtime/executor/
// measured.cc) both write by hand for speed (a million events): the two must
// stay byte-compatible so the traces open side by side.
#pragma once

#include <iterator>
#include <string>

#include <fmt/format.h>

#include "core/units.h"

namespace strata {

// Appends s with JSON string escaping (quotes, backslashes, control characters).
inline void append_json_escaped(std::string& out, const std::string& s) {
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<int>(c));
    } else {
      out += c;
    }
  }
}

// Appends a time in microseconds with nanosecond precision, exactly (integer
// arithmetic, no floating point): the trace format's unit. Negative times print as 0.
inline void append_trace_us(std::string& out, TimeNs ns) {
  if (ns < 0) ns = 0;
  fmt::format_to(std::back_inserter(out), "{}.{:03}", ns / 1000, ns % 1000);
}

}  // namespace strata
