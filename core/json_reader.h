// Strict reading of JSON input files.
//
// Every value a reader asks for is checked for type and range; finish() then
// reports any key that nobody asked for. Errors are InputError naming the file,
// the JSON path ("$.fabric.nic_gbps") and what is allowed. Malformed JSON is
// reported with line and column.
//
// Typical use:
//   nlohmann::json doc = json::parse_file(path);
//   json::ObjectReader r(doc, path);
//   spec.num_layers = r.integer("num_layers", 1, 100000);
//   spec.swiglu = r.boolean_or("swiglu", false);
//   r.finish();
#pragma once

#include <cstdint>
#include <initializer_list>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace strata::json {

// Reads and parses a JSON file. Throws InputError for an unreadable file or
// malformed JSON ("file:line:column: ...").
nlohmann::json parse_file(const std::string& path);

// Parses JSON text; file_label names it in errors.
nlohmann::json parse_text(const std::string& text, const std::string& file_label);

// A short description of a JSON value's type and value, for error messages:
// "a string (\"8\")", "a number (3.5)".
std::string describe(const nlohmann::json& value);

class ObjectReader {
 public:
  // Throws InputError when value is not an object.
  ObjectReader(const nlohmann::json& value, std::string file, std::string path = "$");

  bool has(const std::string& key) const;

  // Required values. Throw InputError when absent, of the wrong type or out of range.
  std::int64_t integer(const std::string& key, std::int64_t min, std::int64_t max);
  double number(const std::string& key, double min, double max);
  bool boolean(const std::string& key);
  std::string string(const std::string& key);
  std::string choice(const std::string& key, const std::vector<std::string>& allowed);

  // Optional values: the fallback when absent; an error when present but invalid.
  std::int64_t integer_or(const std::string& key, std::int64_t fallback, std::int64_t min,
                          std::int64_t max);
  double number_or(const std::string& key, double fallback, double min, double max);
  bool boolean_or(const std::string& key, bool fallback);
  std::string string_or(const std::string& key, const std::string& fallback);
  std::string choice_or(const std::string& key, const std::string& fallback,
                        const std::vector<std::string>& allowed);

  // A nested object (required).
  ObjectReader object(const std::string& key);
  // A required array; each element's path is element_path(key, i).
  const nlohmann::json& array(const std::string& key);
  // The raw value of a key (required), marked as read. Caller checks it.
  const nlohmann::json& raw(const std::string& key);
  // Marks a free-text key ("source", "notes") as allowed and checks it is a
  // string, an array of strings or an object of strings.
  void allow_text(const std::string& key);

  // Throws InputError naming the first key nobody read, with the allowed keys.
  void finish() const;

  std::string path_of(const std::string& key) const;
  std::string element_path(const std::string& key, std::size_t index) const;
  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }
  const nlohmann::json& value() const { return *value_; }

  // Throws InputError at this object's key.
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;

 private:
  const nlohmann::json* find(const std::string& key);
  const nlohmann::json& require(const std::string& key);

  const nlohmann::json* value_;
  std::string file_;
  std::string path_;
  std::set<std::string> known_keys_;
};

}  // namespace strata::json
