// Deterministic, counter-based random numbers for filling tensors: the value of
// element k depends only on (seed, k), so every backend, thread count and shard
// produces the same numbers, and a TP shard can be filled to match the whole.
// Compiles for the host and, inside .cu files, for the device.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define STRATA_HOST_DEVICE __host__ __device__
#else
#define STRATA_HOST_DEVICE
#endif

namespace strata::rt {

// SplitMix64 finalizer (Steele, Lea & Flood, "Fast splittable pseudorandom number
// generators", OOPSLA 2014; constants from Vigna's reference splitmix64.c).
STRATA_HOST_DEVICE inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in [lo, hi) for element `index` of stream `seed`: the top 24 bits of
// the hash (exactly representable in fp32) scaled by one fused multiply-add, so
// host and device round identically.
STRATA_HOST_DEVICE inline float random_uniform(std::uint64_t seed, std::uint64_t index, float lo,
                                               float hi) {
  const std::uint64_t h = splitmix64(splitmix64(seed) ^ index);
  const float unit = static_cast<float>(h >> 40) * (1.0f / 16777216.0f);  // 2^-24
#if defined(__CUDA_ARCH__)
  return fmaf(unit, hi - lo, lo);
#else
  return std::fma(unit, hi - lo, lo);
#endif
}

}  // namespace strata::rt
