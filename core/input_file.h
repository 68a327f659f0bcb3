// Input files: what a command may read, and what it must never overwrite.
//
// Every JSON input is read through json::parse_file, which checks here that the
// path is a regular file (a FIFO would block forever, /dev/zero would read until
// memory runs out, a directory would read as malformed JSON) and records it;
// write_file_atomic (core/atomic_file.h) then refuses to replace any recorded
// input, so `strata memory --model m.json --json m.json` cannot destroy m.json.
#pragma once

#include <optional>
#include <string>

namespace strata {

// Why path cannot be read as an input file ("is a directory", "is a FIFO (named
// pipe)", "does not exist", "is a loop of symbolic links", ...), or nullopt when it can.
std::optional<std::string> not_a_regular_file(const std::string& path);

// Throws InputError naming path when not_a_regular_file(path) says why.
void require_regular_file(const std::string& path);

// Records that this process reads path as an input.
void record_input_file(const std::string& path);

// The recorded input that path names (the same file, by device and inode, under
// whatever name), or nullopt.
std::optional<std::string> recorded_input_at(const std::string& path);

}  // namespace strata
