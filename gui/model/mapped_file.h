// A file mapped into memory, read-only: no copy and no zero-filled buffer
// (reading 180 MB into a std::string cost more than a third of the trace parse).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace strata::gui {

class MappedFile {
 public:
  // Throws InputError naming path when it cannot be opened or mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::string_view text() const { return data_ != nullptr ? std::string_view(data_, size_) : ""; }

 private:
  const char* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace strata::gui
