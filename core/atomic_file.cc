#include "core/atomic_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "core/error.h"

namespace strata {

void write_file_atomic(const std::string& path, const std::string& content) {
  namespace fs = std::filesystem;
  fs::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) {
    fs::create_directories(target.parent_path(), ec);
    if (ec) throw InputError(path, "", "cannot create directory: " + ec.message());
  }
  // The temporary name carries the pid so concurrent writers never share it.
  fs::path temp = target;
  temp += ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) throw InputError(path, "", std::string("cannot write file: ") + std::strerror(errno));
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    if (!out) {
      fs::remove(temp, ec);
      throw InputError(path, "", "error while writing file");
    }
  }
  fs::rename(temp, target, ec);
  if (ec) {
    fs::remove(temp, ec);
    throw InputError(path, "", "cannot rename temporary file into place: " + ec.message());
  }
}

void OutputSet::add(std::string path, std::string content) {
  files_.push_back({std::move(path), std::move(content)});
}

void OutputSet::commit() {
  for (const File& f : files_) write_file_atomic(f.path, f.content);
  files_.clear();
}

}  // namespace strata
