#include "core/error.h"

#include <utility>

namespace strata {
namespace {

std::string format_input_error(const std::string& file, const std::string& json_path,
                               const std::string& message) {
  std::string text;
  if (!file.empty()) text += file + ": ";
  if (!json_path.empty()) text += json_path + ": ";
  text += message;
  return text;
}

}  // namespace

InputError::InputError(std::string file, std::string json_path, std::string message)
    : std::runtime_error(format_input_error(file, json_path, message)),
      file_(std::move(file)),
      json_path_(std::move(json_path)),
      message_(std::move(message)) {}

}  // namespace strata
