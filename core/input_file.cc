#include "core/input_file.h"

#include <cerrno>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include <sys/stat.h>

#include "core/error.h"

namespace strata {
namespace {

struct RecordedInput {
  dev_t device;
  ino_t inode;
  std::string path;
};

// Inputs are few (a command reads a handful of files); a vector is enough. The
// mutex: sweeps and the GUI read files from worker threads.
std::mutex& inputs_mutex() {
  static std::mutex m;
  return m;
}
std::vector<RecordedInput>& inputs() {
  static std::vector<RecordedInput> v;
  return v;
}

}  // namespace

std::optional<std::string> not_a_regular_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {  // follows symbolic links
    if (errno == ENOENT) return std::string("does not exist");
    if (errno == ELOOP) return std::string("is a loop of symbolic links");
    return std::string("cannot be read: ") + std::strerror(errno);
  }
  if (S_ISREG(st.st_mode)) return std::nullopt;
  if (S_ISDIR(st.st_mode)) return std::string("is a directory, not a file");
  const char* kind = S_ISFIFO(st.st_mode)   ? "a FIFO (named pipe)"
                     : S_ISCHR(st.st_mode)  ? "a character device"
                     : S_ISBLK(st.st_mode)  ? "a block device"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                                            : "not a regular file";
  return std::string("is ") + kind + ": inputs are read only from regular files";
}

void require_regular_file(const std::string& path) {
  if (auto why = not_a_regular_file(path)) throw InputError(path, "", *why);
}

void record_input_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;
  std::lock_guard<std::mutex> lock(inputs_mutex());
  for (const RecordedInput& in : inputs()) {
    if (in.device == st.st_dev && in.inode == st.st_ino) return;
  }
  inputs().push_back({st.st_dev, st.st_ino, path});
}

std::optional<std::string> recorded_input_at(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;  // a new file replaces nothing
  std::lock_guard<std::mutex> lock(inputs_mutex());
  for (const RecordedInput& in : inputs()) {
    if (in.device == st.st_dev && in.inode == st.st_ino) return in.path;
  }
  return std::nullopt;
}

}  // namespace strata
