#include "gui/model/trace_search.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <sstream>
#include <tuple>

#include "core/error.h"

namespace strata::gui {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

int parse_int(const std::string& word, const std::string& value) {
  int out = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), out);
  if (ec != std::errc() || end != value.data() + value.size()) {
    throw InputError("", "", "search: \"" + word + "\": expected an integer after the colon");
  }
  return out;
}

// The start of a match, for ordering.
auto order_key(const TraceModel& trace, SpanRef r) {
  return std::make_tuple(trace.lanes[r.lane].spans[r.span].start_ns, r.lane, r.span);
}

}  // namespace

bool SearchQuery::empty() const {
  return name_parts.empty() && !category && !mb && !layer && !chunk && !phase && lane_parts.empty();
}

SearchQuery parse_search(const std::string& text) {
  SearchQuery q;
  std::istringstream words(text);
  std::string word;
  while (words >> word) {
    const auto colon = word.find(':');
    if (colon == std::string::npos) {
      q.name_parts.push_back(lower(word));
      continue;
    }
    const std::string key = lower(word.substr(0, colon));
    const std::string value = word.substr(colon + 1);
    if (key == "cat" || key == "category") {
      Category c;
      if (!parse_category(lower(value), &c)) {
        throw InputError("", "", "search: \"" + word + "\": unknown category; allowed: " + trace::category_names());
      }
      q.category = c;
    } else if (key == "mb") {
      q.mb = parse_int(word, value);
    } else if (key == "layer") {
      q.layer = parse_int(word, value);
    } else if (key == "chunk") {
      q.chunk = parse_int(word, value);
    } else if (key == "phase") {
      Phase p;
      if (!parse_phase(lower(value), &p)) {
        throw InputError("", "", "search: \"" + word + "\": unknown phase; allowed: " + trace::phase_names());
      }
      q.phase = p;
    } else if (key == "lane") {
      q.lane_parts.push_back(lower(value));
    } else {
      throw InputError("", "", "search: \"" + word + "\": unknown key \"" + key +
                       "\"; allowed: cat, mb, layer, chunk, phase, lane (or a word of the task's name)");
    }
  }
  return q;
}

std::vector<SpanRef> find_spans(const TraceModel& trace, const SearchQuery& q) {
  std::vector<SpanRef> out;
  if (q.empty()) return out;
  // Names are interned: test each distinct name once.
  std::vector<char> name_ok(trace.names.size(), 1);
  if (!q.name_parts.empty()) {
    for (std::size_t n = 0; n < trace.names.size(); ++n) {
      const std::string name = lower(trace.names[n]);
      for (const std::string& part : q.name_parts) name_ok[n] = name_ok[n] && name.find(part) != std::string::npos;
    }
  }
  for (int l = 0; l < static_cast<int>(trace.lanes.size()); ++l) {
    const Lane& lane = trace.lanes[l];
    if (!q.lane_parts.empty()) {
      const std::string label = lower(lane.stream_label);
      bool ok = true;
      for (const std::string& part : q.lane_parts) ok = ok && label.find(part) != std::string::npos;
      if (!ok) continue;
    }
    for (std::size_t i = 0; i < lane.spans.size(); ++i) {
      const Span& s = lane.spans[i];
      if (q.category && s.category != *q.category) continue;
      const SpanDetail& d = trace.details[s.detail];
      if (!name_ok[d.name]) continue;
      if (q.mb && d.mb != *q.mb) continue;
      if (q.layer && d.layer != *q.layer) continue;
      if (q.chunk && d.chunk != *q.chunk) continue;
      if (q.phase && d.phase != *q.phase) continue;
      out.push_back(SpanRef{l, static_cast<std::int64_t>(i)});
    }
  }
  std::sort(out.begin(), out.end(),
            [&](SpanRef a, SpanRef b) { return order_key(trace, a) < order_key(trace, b); });
  return out;
}

std::int64_t next_match(const TraceModel& trace, const std::vector<SpanRef>& matches, std::optional<SpanRef> current,
                        TimeNs from_ns, bool backwards) {
  if (matches.empty()) return -1;
  const auto n = static_cast<std::int64_t>(matches.size());
  // The position of the current match, or where from_ns falls among the matches.
  std::int64_t at = -1;
  if (current) {
    const auto it = std::lower_bound(matches.begin(), matches.end(), *current, [&](SpanRef a, SpanRef b) {
      return order_key(trace, a) < order_key(trace, b);
    });
    if (it != matches.end() && *it == *current) at = it - matches.begin();
  }
  if (at >= 0) return backwards ? (at - 1 + n) % n : (at + 1) % n;
  const auto first_after = std::partition_point(matches.begin(), matches.end(), [&](SpanRef r) {
    return trace.lanes[r.lane].spans[r.span].start_ns < from_ns;
  });
  const std::int64_t k = first_after - matches.begin();
  return backwards ? (k - 1 + n) % n : k % n;
}

}  // namespace strata::gui
