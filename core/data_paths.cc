#include "core/data_paths.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include <unistd.h>

#include "core/error.h"
#include "core/input_file.h"

namespace strata {
namespace fs = std::filesystem;

std::string data_root() {
  if (const char* env = std::getenv("STRATA_DATA_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
#ifdef STRATA_SOURCE_DIR
  if (fs::exists(fs::path(STRATA_SOURCE_DIR) / "scenarios")) return STRATA_SOURCE_DIR;
#endif
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    fs::path share = exe.parent_path().parent_path() / "share" / "strata";
    if (fs::exists(share)) return share.string();
  }
  return ".";
}

std::vector<std::string> shipped_names(const std::string& subdir) {
  std::vector<std::string> names;
  fs::path dir = fs::path(data_root()) / subdir;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return names;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string resolve_data_file(const std::string& argument, const std::string& subdir,
                              const std::string& what) {
  std::error_code ec;
  if (fs::is_regular_file(argument, ec)) return argument;
  bool looks_like_path = argument.find('/') != std::string::npos ||
                         (argument.size() > 5 && argument.substr(argument.size() - 5) == ".json");
  if (!looks_like_path) {
    fs::path shipped = fs::path(data_root()) / subdir / (argument + ".json");
    if (fs::is_regular_file(shipped, ec)) return shipped.string();
  }
  // A path that exists but cannot be an input (a directory, a FIFO, /dev/zero, a
  // loop of links) is named as what it is, not as a missing file.
  const bool something_there = fs::symlink_status(argument, ec).type() != fs::file_type::not_found && !ec;
  if (auto why = not_a_regular_file(argument); why && something_there) {
    throw InputError(argument, "", "cannot be read as a " + what + " file: it " + *why);
  }
  std::string names;
  for (const std::string& n : shipped_names(subdir)) names += (names.empty() ? "" : ", ") + n;
  throw InputError(argument, "",
                   "no such " + what + " file, and no shipped " + what + " of that name (shipped: " +
                       (names.empty() ? "none" : names) + ")");
}

}  // namespace strata
