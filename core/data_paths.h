// Finding shipped data: `--model gpt3-175b` means scenarios/models/gpt3-175b.json.
//
// The data root is, in order: $STRATA_DATA_DIR; the source tree the binary was
// built from (STRATA_SOURCE_DIR, compiled in); <exe>/../share/strata.
#pragma once

#include <string>
#include <vector>

namespace strata {

// The directory holding scenarios/, calib/profiles/ and topologies/presets/.
std::string data_root();

// Resolves a user argument to a file: an existing path is returned as is;
// otherwise a bare name is looked up as <data_root>/<subdir>/<name>.json.
// Throws InputError naming the argument, the places searched and the shipped names.
// what: "model", "plan", "cluster", "profile", ... (for the message).
std::string resolve_data_file(const std::string& argument, const std::string& subdir,
                              const std::string& what);

// Relative file names (without .json) shipped under <data_root>/<subdir>, sorted.
std::vector<std::string> shipped_names(const std::string& subdir);

}  // namespace strata
