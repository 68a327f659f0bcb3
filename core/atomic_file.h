// Output files are written whole or not at all: content goes to a temporary file
// in the same directory, which is then renamed over the destination. A failed
// run never leaves half a file behind.
#pragma once

#include <string>
#include <vector>

namespace strata {

// Writes content to path atomically. Creates missing parent directories.
// Throws OutputError (not writable, disk full) naming the path and the system's
// reason, and InputError when path is a file this command read (core/input_file.h).
void write_file_atomic(const std::string& path, const std::string& content);

// Collects several output files and writes them only when commit() is called,
// so a command that fails half-way writes none of its outputs.
class OutputSet {
 public:
  void add(std::string path, std::string content);
  // Writes every file, or none: throws as write_file_atomic does, leaving no new
  // file or directory behind.
  void commit();
  bool empty() const { return files_.empty(); }

 private:
  struct File {
    std::string path;
    std::string content;
  };
  std::vector<File> files_;
};

}  // namespace strata
