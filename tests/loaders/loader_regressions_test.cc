// The loaders behind the fuzz targets (loaders.h): each accepts the shipped
// files of its kind, and every input a fuzz target found crashing a loader,
// checked in under regressions/<loader>/, is now refused with InputError at the
// JSON path that is at fault.
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/json_reader.h"
#include "tests/loaders/loaders.h"

namespace strata::testing {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Loads path's text through the named loader as the fuzz target does.
void load_text(const std::string& loader_name, const fs::path& path) {
  const Loader& l = loader(loader_name);
  l.load(json::parse_text(read_text(path), l.file), l.file);
}

// One shipped (or seed) file per loader that it must accept: the fuzz targets
// start from these, so a loader that refused them would fuzz nothing but its errors.
struct Accepted {
  std::string loader;
  std::string file;  // under the source tree
};

const Accepted kAccepted[] = {
    {"model", "scenarios/models/llama3-70b.json"},
    {"plan", "scenarios/plans/llama3-70b-64.json"},
    {"cluster", "scenarios/clusters/dgx-h100-8node.json"},
    {"device_profile", "calib/profiles/h100-sxm5-80gb.json"},
    {"framework_profile", "scenarios/frameworks/megatron-core.json"},
    {"constraints", "tests/fuzz/seeds/constraints/every-kind.json"},
    {"run_config", "tests/fuzz/seeds/strata-run/tiny-tp2-pp2-zero1.json"},
    {"measured", "tests/fuzz/seeds/measured/tiny-tp2-pp2-zero1.json"},
    {"calculon", "tests/fuzz/seeds/calculon/gpt3-175b-64-a100.json"},
};

TEST(Loaders, EachAcceptsItsShippedFile) {
  std::set<std::string> covered;
  for (const Accepted& a : kAccepted) {
    SCOPED_TRACE(a.loader + ": " + a.file);
    try {
      load_text(a.loader, fs::path(STRATA_SOURCE_DIR) / a.file);
    } catch (const InputError& e) {
      ADD_FAILURE() << e.what() << " at " << e.json_path() << ": " << e.message();
    }
    covered.insert(a.loader);
  }
  EXPECT_EQ(covered.size(), loaders().size()) << "a loader without an accepted file";
}

// An input a fuzz target found, and where its error must point.
struct Regression {
  std::string loader;      // regressions/<loader>/
  std::string input;       // the crashing input, as libFuzzer wrote it
  std::string error_file;  // the InputError's file ("model.json:1:1" for malformed JSON)
  std::string json_path;   // and its JSON path
};

// Each with the defect it exposed (docs/testing.md lists them).
const Regression kRegressions[] = {
    // 1e309: nlohmann's out_of_range escaped json::parse_text (it caught parse_error only).
    {"model", "number-beyond-a-double.input", "model.json:1:1", ""},
    {"plan", "number-beyond-a-double.input", "plan.json:4:22", ""},
    // "ranks": 1e10 passed the "above 0" check and was converted to int (undefined;
    // UBSan: outside the range of int). Found reading the loader for the fuzz target,
    // confirmed by fuzz_measured on this input.
    {"measured", "ranks-beyond-an-int.input", "measured.json", "$.ranks"},
};

TEST(LoaderRegressions, EachFoundInputIsRefusedCleanly) {
  for (const Regression& r : kRegressions) {
    SCOPED_TRACE(r.loader + "/" + r.input);
    try {
      load_text(r.loader, fs::path(STRATA_LOADERS_DIR) / "regressions" / r.loader / r.input);
      ADD_FAILURE() << "accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(e.file(), r.error_file) << e.what();
      EXPECT_EQ(e.json_path(), r.json_path) << e.what();
    }
  }
}

TEST(LoaderRegressions, EveryCheckedInInputIsListed) {
  std::set<std::string> listed;
  for (const Regression& r : kRegressions) listed.insert(r.loader + "/" + r.input);
  const fs::path root = fs::path(STRATA_LOADERS_DIR) / "regressions";
  if (!fs::exists(root)) return;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file()) continue;
    const std::string name = fs::relative(entry.path(), root).generic_string();
    EXPECT_TRUE(listed.count(name)) << name << " is not in kRegressions";
  }
}

}  // namespace
}  // namespace strata::testing
