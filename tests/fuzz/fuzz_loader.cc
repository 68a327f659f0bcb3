// One libFuzzer target per input loader: this file, built once per loader with
// STRATA_FUZZ_LOADER naming it (tests/loaders/loaders.h). Each input is parsed as
// the loader's file (json::parse_text: every check json::parse_file makes once it
// has read a regular file) and loaded. An InputError is the refusal every loader
// owes bad input; any other exception escapes and aborts the process, which
// libFuzzer reports as a crash, as it does every sanitizer finding, leak or hang.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/json_reader.h"
#include "tests/loaders/loaders.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const strata::testing::Loader& loader = strata::testing::loader(STRATA_FUZZ_LOADER);
  try {
    const std::string text(reinterpret_cast<const char*>(data), size);
    loader.load(strata::json::parse_text(text, loader.file), loader.file);
  } catch (const strata::InputError&) {
  }
  return 0;
}
