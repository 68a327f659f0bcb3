#include "core/json_reader.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"
#include "core/input_file.h"

namespace strata::json {
namespace {

// Line and column (1-based) of a byte offset in text.
std::pair<std::size_t, std::size_t> line_and_column(const std::string& text, std::size_t offset) {
  std::size_t line = 1;
  std::size_t column = 1;
  offset = std::min(offset, text.size());
  for (std::size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

bool is_identifier(const std::string& key) {
  if (key.empty()) return false;
  return std::all_of(key.begin(), key.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    out += "\"" + items[i] + "\"";
  }
  return out;
}

std::string format_bound(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{:g}", v);
}

}  // namespace

namespace {

// Deeper than any file Strata reads (traces and sweeps are under 10 levels); far
// from what would exhaust the stack of code that walks a value recursively.
constexpr std::size_t kMaxDepth = 256;

// A first pass over the text that refuses what nlohmann::json would accept
// silently: a key given twice in one object (the last would win) and nesting
// deeper than kMaxDepth. It stops at the first problem, before any value is built.
class StrictnessCheck : public nlohmann::json_sax<nlohmann::json> {
 public:
  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override { return open(true); }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    Frame& f = frames_.back();
    f.key = k;
    if (!f.keys.insert(k).second) {
      return fail(path(), "duplicate key: this object already has \"" + k +
                              "\" (one of the two would be ignored silently); give each key once");
    }
    return true;
  }
  bool parse_error(std::size_t position, const std::string& last_token, const nlohmann::detail::exception&) override {
    malformed_ = true;  // parse_text reports it, with line and column
    // Where the offending token starts: position counts the characters read, the token's included.
    error_offset_ = position >= last_token.size() ? position - last_token.size() : 0;
    error_token_ = last_token;
    return false;
  }

  bool malformed() const { return malformed_; }
  std::size_t error_offset() const { return error_offset_; }
  const std::string& error_token() const { return error_token_; }
  const std::string& error_path() const { return error_path_; }
  const std::string& error() const { return error_; }

 private:
  struct Frame {
    bool object = false;
    std::string key;                   // the object's current key
    std::size_t next_index = 0;        // the array's next element
    std::set<std::string> keys;        // the object's keys so far
  };

  // A value starts inside the innermost container: an array's next element.
  void enter_value() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().next_index;
  }
  bool value() {
    enter_value();
    return true;
  }
  bool open(bool object) {
    enter_value();
    if (frames_.size() >= kMaxDepth) {
      return fail(path(), fmt::format("nested deeper than {} levels: no Strata file needs that many", kMaxDepth));
    }
    frames_.push_back(Frame{object, {}, 0, {}});
    return true;
  }
  bool close() {
    frames_.pop_back();
    return true;
  }
  // The JSON path of the value being read: each container's key or index.
  std::string path() const {
    std::string p = "$";
    for (std::size_t i = 0; i < frames_.size(); ++i) {
      const Frame& f = frames_[i];
      if (f.object) {
        if (!f.key.empty() && is_identifier(f.key)) {
          p.append(".").append(f.key);
        } else {
          p.append("[").append(nlohmann::json(f.key).dump()).append("]");
        }
      } else if (f.next_index > 0) {
        p.append("[").append(std::to_string(f.next_index - 1)).append("]");
      }
    }
    return p;
  }
  bool fail(std::string path, std::string message) {
    error_path_ = std::move(path);
    error_ = std::move(message);
    return false;
  }

  std::vector<Frame> frames_;
  bool malformed_ = false;
  std::size_t error_offset_ = 0;
  std::string error_token_;
  std::string error_path_, error_;
};

// JSON has no NaN or Infinity; Python's json.dump writes them, so say so.
bool starts_non_finite(const std::string& text, std::size_t offset) {
  for (const char* word : {"NaN", "nan", "Infinity", "infinity", "inf", "Inf"}) {
    if (text.compare(offset, std::strlen(word), word) == 0) return true;
  }
  return false;
}

}  // namespace

nlohmann::json parse_text(const std::string& text, const std::string& file_label) {
  StrictnessCheck check;
  const bool ok = nlohmann::json::sax_parse(text, &check);
  if (!ok && !check.malformed()) throw InputError(file_label, check.error_path(), check.error());
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // byte is 1-based and points just past the offending character.
    std::size_t offset = e.byte > 0 ? e.byte - 1 : 0;
    auto [line, column] = line_and_column(text, offset);
    if (starts_non_finite(text, offset)) {
      throw InputError(fmt::format("{}:{}:{}", file_label, line, column), "",
                       "malformed JSON: NaN and Infinity are not JSON numbers; write a finite number");
    }
    std::string what = e.what();
    // nlohmann's message starts with "[json.exception.parse_error.101] parse error at line..";
    // keep only the part after the last ": " which says what was expected.
    auto pos = what.rfind(": ");
    std::string reason = pos == std::string::npos ? what : what.substr(pos + 2);
    throw InputError(fmt::format("{}:{}:{}", file_label, line, column), "",
                     "malformed JSON: " + reason);
  } catch (const nlohmann::json::out_of_range&) {
    // A number past a double's range (1e309): nlohmann reports it as out_of_range,
    // not as a parse_error, and without its place; the first pass saw where.
    auto [line, column] = line_and_column(text, check.error_offset());
    throw InputError(fmt::format("{}:{}:{}", file_label, line, column), "",
                     fmt::format("number out of range: {} is beyond a double's largest, about 1.8e308",
                                 check.error_token()));
  }
}

nlohmann::json parse_file(const std::string& path) {
  require_regular_file(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "", std::string("cannot open file for reading: ") + std::strerror(errno));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw InputError(path, "", "error while reading file");
  record_input_file(path);
  return parse_text(buffer.str(), path);
}

// Containers are not dumped: a wrong-typed value may be megabytes, or nested
// deep enough that dumping it would recurse past the stack.
std::string describe(const nlohmann::json& value) {
  auto shown = [&value] {
    std::string dumped = value.dump();
    if (dumped.size() > 40) dumped = dumped.substr(0, 37) + "...";
    return dumped;
  };
  switch (value.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::boolean: return "a boolean (" + shown() + ")";
    case nlohmann::json::value_t::string: return "a string (" + shown() + ")";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return "an integer (" + shown() + ")";
    case nlohmann::json::value_t::number_float: return "a number (" + shown() + ")";
    case nlohmann::json::value_t::array: return fmt::format("an array (of {} elements)", value.size());
    case nlohmann::json::value_t::object: return fmt::format("an object (of {} keys)", value.size());
    default: return "a value of unsupported type";
  }
}

ObjectReader::ObjectReader(const nlohmann::json& value, std::string file, std::string path)
    : value_(&value), file_(std::move(file)), path_(std::move(path)) {
  if (!value.is_object()) {
    throw InputError(file_, path_, "expected a JSON object, got " + describe(value));
  }
}

bool ObjectReader::has(const std::string& key) const { return value_->contains(key); }

std::string ObjectReader::path_of(const std::string& key) const {
  if (is_identifier(key)) return path_ + "." + key;
  return path_ + "[" + nlohmann::json(key).dump() + "]";
}

std::string ObjectReader::element_path(const std::string& key, std::size_t index) const {
  return path_of(key) + "[" + std::to_string(index) + "]";
}

void ObjectReader::fail(const std::string& key, const std::string& message) const {
  throw InputError(file_, path_of(key), message);
}

const nlohmann::json* ObjectReader::find(const std::string& key) {
  known_keys_.insert(key);
  auto it = value_->find(key);
  return it == value_->end() ? nullptr : &*it;
}

const nlohmann::json& ObjectReader::require(const std::string& key) {
  const nlohmann::json* v = find(key);
  if (v == nullptr) {
    throw InputError(file_, path_of(key), "required key is missing");
  }
  return *v;
}

std::int64_t ObjectReader::integer(const std::string& key, std::int64_t min, std::int64_t max) {
  const nlohmann::json& v = require(key);
  if (!v.is_number_integer()) {
    fail(key, fmt::format("expected an integer in [{}, {}], got {}", min, max, describe(v)));
  }
  if (v.is_number_unsigned() &&
      v.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    fail(key, fmt::format("expected an integer in [{}, {}], got {}", min, max, v.dump()));
  }
  std::int64_t x = v.get<std::int64_t>();
  if (x < min || x > max) {
    fail(key, fmt::format("expected an integer in [{}, {}], got {}", min, max, x));
  }
  return x;
}

double ObjectReader::number(const std::string& key, double min, double max) {
  const nlohmann::json& v = require(key);
  if (!v.is_number()) {
    fail(key, fmt::format("expected a number in [{}, {}], got {}", format_bound(min),
                          format_bound(max), describe(v)));
  }
  double x = v.get<double>();
  if (!(x >= min && x <= max)) {
    fail(key, fmt::format("expected a number in [{}, {}], got {}", format_bound(min),
                          format_bound(max), v.dump()));
  }
  return x;
}

bool ObjectReader::boolean(const std::string& key) {
  const nlohmann::json& v = require(key);
  if (!v.is_boolean()) fail(key, "expected true or false, got " + describe(v));
  return v.get<bool>();
}

std::string ObjectReader::string(const std::string& key) {
  const nlohmann::json& v = require(key);
  if (!v.is_string()) fail(key, "expected a string, got " + describe(v));
  return v.get<std::string>();
}

std::string ObjectReader::choice(const std::string& key, const std::vector<std::string>& allowed) {
  const nlohmann::json& v = require(key);
  if (!v.is_string() ||
      std::find(allowed.begin(), allowed.end(), v.get<std::string>()) == allowed.end()) {
    fail(key, "expected one of " + join(allowed) + ", got " + describe(v));
  }
  return v.get<std::string>();
}

std::int64_t ObjectReader::integer_or(const std::string& key, std::int64_t fallback,
                                      std::int64_t min, std::int64_t max) {
  if (find(key) == nullptr) return fallback;
  return integer(key, min, max);
}

double ObjectReader::number_or(const std::string& key, double fallback, double min, double max) {
  if (find(key) == nullptr) return fallback;
  return number(key, min, max);
}

bool ObjectReader::boolean_or(const std::string& key, bool fallback) {
  if (find(key) == nullptr) return fallback;
  return boolean(key);
}

std::string ObjectReader::string_or(const std::string& key, const std::string& fallback) {
  if (find(key) == nullptr) return fallback;
  return string(key);
}

std::string ObjectReader::choice_or(const std::string& key, const std::string& fallback,
                                    const std::vector<std::string>& allowed) {
  if (find(key) == nullptr) return fallback;
  return choice(key, allowed);
}

ObjectReader ObjectReader::object(const std::string& key) {
  const nlohmann::json& v = require(key);
  return ObjectReader(v, file_, path_of(key));
}

const nlohmann::json& ObjectReader::array(const std::string& key) {
  const nlohmann::json& v = require(key);
  if (!v.is_array()) fail(key, "expected an array, got " + describe(v));
  return v;
}

const nlohmann::json& ObjectReader::raw(const std::string& key) { return require(key); }

void ObjectReader::allow_text(const std::string& key) {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return;
  auto is_text = [](const nlohmann::json& x) { return x.is_string(); };
  bool ok = v->is_string() ||
            (v->is_array() && std::all_of(v->begin(), v->end(), is_text)) ||
            (v->is_object() && std::all_of(v->begin(), v->end(), is_text));
  if (!ok) fail(key, "expected free text: a string, an array of strings or an object of strings");
}

void ObjectReader::finish() const {
  for (auto it = value_->begin(); it != value_->end(); ++it) {
    const std::string& key = it.key();
    if (known_keys_.count(key) != 0) continue;
    std::vector<std::string> allowed(known_keys_.begin(), known_keys_.end());
    std::string hint;
    std::size_t best = 3;  // suggest only close spellings
    for (const std::string& candidate : allowed) {
      std::size_t d = edit_distance(key, candidate);
      if (d < best) {
        best = d;
        hint = " (did you mean \"" + candidate + "\"?)";
      }
    }
    throw InputError(file_, path_of(key),
                     "unknown key" + hint + "; allowed keys here: " + join(allowed));
  }
}

}  // namespace strata::json
