// The trace parser: nlohmann::json's SAX interface straight into the compact
// TraceModel (no document tree of the events), over trace_input's pieces.
// trace_reader cuts big files into parts and merges what this parses.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gui/model/trace_input.h"
#include "gui/model/trace_model.h"

namespace strata::gui {

class TraceSax;

// One part of a trace (or the whole), parsed.
class ParsedPart {
 public:
  ParsedPart();
  ~ParsedPart();
  ParsedPart(ParsedPart&&) noexcept;
  ParsedPart& operator=(ParsedPart&&) noexcept;

  // Parsed without error, and traceEvents was there.
  bool complete() const;
  // The model of a whole trace; throws Cancelled, or InputError naming the file,
  // the JSON path or line and column, and what is wrong.
  TraceModel finish(const std::string& file);
  // Appends a later part's events and other top-level values to this one's.
  void append(ParsedPart&& later);

 private:
  friend ParsedPart parse_part(const std::vector<trace_input::Piece>&, const std::string&,
                               trace_input::ParseProgress*, bool);
  std::unique_ptr<TraceSax> sax_;
  bool ok_ = false;
  bool cancelled_ = false;
};

// Parses pieces as one JSON text. shared counts the bytes and carries the
// cancel; `reports` says whether this part calls the progress function (only
// one thread does).
ParsedPart parse_part(const std::vector<trace_input::Piece>& pieces, const std::string& file,
                      trace_input::ParseProgress* shared, bool reports);

}  // namespace strata::gui
