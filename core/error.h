// Errors that cross Strata's library boundaries.
//
// Three kinds, because the user must act differently on each:
//   InputError    - the user's files or flags are wrong (exit code 2). It names the
//                   file, the JSON path inside it and what is allowed.
//   OutputError   - an output could not be written (disk full, no permission; exit
//                   code 3): nothing was written. It names the file and the system's reason.
//   InternalError - Strata itself failed (exit code 1).
// Library code throws these; only cli/ turns them into exit codes.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

namespace strata {

// Exit codes of every strata command.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitOutputFailed = 3;

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

// An InputError too, so that every place that reports a file's problem to the
// user (the GUI's message boxes, the runtime's per-rank errors) reports this one;
// the command line tells them apart by their exit codes.
class OutputError : public InputError {
 public:
  OutputError(std::string file, std::string message) : InputError(std::move(file), "", std::move(message)) {}
};

class InternalError : public std::runtime_error {
 public:
  explicit InternalError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace strata
