// Output files are written whole or not at all: content goes to a temporary file
// in the same directory, which is then renamed over the destination. A failed
// run never leaves half a file behind.
#pragma once

#include <string>
#include <vector>

namespace strata {

// Writes content to path atomically. Creates missing parent directories.
// Throws InputError (path not writable) naming the path.
void write_file_atomic(const std::string& path, const std::string& content);

// Collects several output files and writes them only when commit() is called,
// so a command that fails half-way writes none of its outputs.
class OutputSet {
 public:
  void add(std::string path, std::string content);
  // Writes every file (each atomically). Throws InputError if one cannot be written.
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
