#include "topologies/router.h"

#include "topologies/generic_router.h"
#include "topologies/structured_router.h"

namespace strata::topo {

std::uint64_t flow_hash(std::uint64_t key, std::uint64_t a, std::uint64_t b) {
  // splitmix64 (Steele, Lea, Flood: "Fast splittable pseudorandom number generators",
  // OOPSLA 2014) over the three words.
  std::uint64_t x = key ^ (a * 0x9E3779B97F4A7C15ULL) ^ (b * 0xC2B2AE3D27D4EB4FULL);
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

std::unique_ptr<Router> make_router(const BuiltGraph& built, const ClusterSpec& cluster) {
  if (built.node_template) return std::make_unique<StructuredRouter>(built);
  return std::make_unique<GenericRouter>(built, cluster);
}

}  // namespace strata::topo
