#include "core/atomic_file.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <unistd.h>

#include "core/error.h"
#include "core/input_file.h"

namespace strata {
namespace fs = std::filesystem;
namespace {

// An output must never replace a file this command read (core/input_file.h).
void refuse_input(const std::string& path) {
  if (auto input = recorded_input_at(path)) {
    throw InputError(path, "",
                     "is an input of this command (read as " + *input +
                         "): writing here would replace it; choose another output path");
  }
}

// Creates the missing directories above path; returns those it created, so
// that a failed write can take them away again.
std::vector<fs::path> create_parents(const std::string& path) {
  std::vector<fs::path> created;
  const fs::path parent = fs::path(path).parent_path();
  if (parent.empty()) return created;
  std::error_code ec;
  for (fs::path p = parent; !p.empty() && !fs::exists(p, ec); p = p.parent_path()) created.push_back(p);
  fs::create_directories(parent, ec);
  if (ec) throw OutputError(path, "cannot create directory " + parent.string() + ": " + ec.message());
  return created;
}

// The deepest first: a parent is empty only once its children are gone.
void remove_empty(std::vector<fs::path> dirs) {
  std::sort(dirs.begin(), dirs.end(),
            [](const fs::path& a, const fs::path& b) { return a.string().size() > b.string().size(); });
  std::error_code ec;
  for (const fs::path& d : dirs) fs::remove(d, ec);  // fails, harmlessly, when not empty
}

// The temporary file next to path; its name carries the pid so concurrent
// writers never share it.
std::string temp_name(const std::string& path) { return path + ".tmp." + std::to_string(::getpid()); }

// Writes content to temp with the system's own calls, so that a failure says the
// system's reason ("No space left on device", "File too large").
void write_temp(const std::string& path, const std::string& temp, const std::string& content) {
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw OutputError(path, std::string("cannot write file: ") + std::strerror(errno));
  std::size_t done = 0;
  int error = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = n < 0 ? errno : ENOSPC;
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0 && error == 0) error = errno;
  if (error != 0) {
    ::unlink(temp.c_str());
    throw OutputError(path, std::string("error while writing file: ") + std::strerror(error));
  }
}

void rename_into_place(const std::string& path, const std::string& temp) {
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    throw OutputError(path, std::string("cannot rename temporary file into place: ") + std::strerror(error));
  }
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& content) {
  refuse_input(path);
  const std::vector<fs::path> created = create_parents(path);
  const std::string temp = temp_name(path);
  try {
    write_temp(path, temp, content);
    rename_into_place(path, temp);
  } catch (...) {
    remove_empty(created);
    throw;
  }
}

void OutputSet::add(std::string path, std::string content) {
  files_.push_back({std::move(path), std::move(content)});
}

// All or nothing: every temporary file is written before any is renamed, so a
// full disk or a missing permission leaves no new file (and no new directory).
void OutputSet::commit() {
  for (const File& f : files_) refuse_input(f.path);
  std::vector<fs::path> created;
  std::vector<std::string> temps;
  try {
    for (const File& f : files_) {
      for (fs::path& d : create_parents(f.path)) created.push_back(std::move(d));
      const std::string temp = temp_name(f.path);
      write_temp(f.path, temp, f.content);
      temps.push_back(temp);
    }
  } catch (...) {
    for (const std::string& t : temps) ::unlink(t.c_str());
    remove_empty(created);
    throw;
  }
  // Renaming within a directory needs no space; it fails only if the directory
  // changed under us, and then the files renamed so far stay complete.
  for (std::size_t i = 0; i < files_.size(); ++i) rename_into_place(files_[i].path, temps[i]);
  files_.clear();
}

}  // namespace strata
