// Errors that cross Strata's library boundaries.
//
// Two kinds, because the user must act differently on each:
//   InputError    - the user's files or flags are wrong (exit code 2). It names the
//                   file, the JSON path inside it and what is allowed.
//   InternalError - Strata itself failed (exit code 1).
// Library code throws these; only cli/ turns them into exit codes.
#pragma once

#include <stdexcept>
#include <string>

namespace strata {

// Exit codes of every strata command.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;
inline constexpr int kExitBadInput = 2;

class InputError : public std::runtime_error {
 public:
  // file: the file the value came from ("" for command-line flags).
  // json_path: "$.fabric.kind" style path ("" when the whole file is at fault).
  // message: what is wrong and what is allowed.
  InputError(std::string file, std::string json_path, std::string message);

  const std::string& file() const { return file_; }
  const std::string& json_path() const { return json_path_; }
  const std::string& message() const { return message_; }

 private:
  std::string file_;
  std::string json_path_;
  std::string message_;
};

class InternalError : public std::runtime_error {
 public:
  explicit InternalError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace strata
