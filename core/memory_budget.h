// How much memory one command may plan to use: half of this machine's physical
// memory, so that a step, sweep or topology too large to build is refused with
// the key that made it so, before it is built, instead of ending in
// std::bad_alloc (or the kernel's OOM killer) minutes later.
#pragma once

#include <cstdint>

namespace strata {

// This machine's physical memory in bytes (sysconf), 0 when unknown.
std::uint64_t physical_memory_bytes();

// STRATA_MEMORY_BUDGET_GIB when set (InputError when it is not a positive
// number), else half the physical memory, 64 GiB when that is unknown. The
// figure depends on the machine, not on the inputs or the threads, so a refusal
// is the same on every run on one machine.
double memory_budget_bytes();

// "12.0 GiB (half of this machine's 24.0 GiB)", for messages.
const char* memory_budget_words();

}  // namespace strata
