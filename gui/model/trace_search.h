// Search in a timeline (the Find box): a query of words, each a condition every
// match meets —
//   fc1          the task's name contains "fc1" (case does not matter)
//   cat:tp       its category is tp (docs/formats.md's names)
//   mb:3         its micro-batch is 3
//   layer:12     its layer is 12
//   chunk:1      its virtual stage is 1
//   phase:bwd    its phase (fwd, bwd, recompute, step, wgrad)
//   lane:exposed its lane's name contains "exposed"
// Qt-free.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gui/model/trace_model.h"

namespace strata::gui {

struct SearchQuery {
  std::vector<std::string> name_parts;  // lower case; each must occur in the name
  std::optional<Category> category;
  std::optional<int> mb, layer, chunk;
  std::optional<Phase> phase;
  std::vector<std::string> lane_parts;  // lower case; each must occur in the lane's name
  bool empty() const;
};

// The query text parsed; a word "key:value" with an unknown key or a bad value
// throws InputError naming the word and what is allowed.
SearchQuery parse_search(const std::string& text);

// Every span that matches, in time order (start, then lane, then index).
std::vector<SpanRef> find_spans(const TraceModel& trace, const SearchQuery& query);

// The match to go to from the one at `current` (or from time from_ns when there is
// none): the next in time order, or the previous when backwards, wrapping around.
// -1 when matches is empty.
std::int64_t next_match(const TraceModel& trace, const std::vector<SpanRef>& matches,
                        std::optional<SpanRef> current, TimeNs from_ns, bool backwards);

}  // namespace strata::gui
