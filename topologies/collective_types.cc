#include "topologies/collective_types.h"

namespace strata::topo {

const char* to_string(CollectiveAlgorithm a) {
  switch (a) {
    case CollectiveAlgorithm::kRing: return "ring";
    case CollectiveAlgorithm::kTree: return "tree";
    case CollectiveAlgorithm::kNvls: return "nvls";
    case CollectiveAlgorithm::kNvlsTree: return "nvls_tree";
    case CollectiveAlgorithm::kHierarchical: return "hierarchical";
    case CollectiveAlgorithm::kDirect: return "direct";
  }
  return "ring";
}

const char* to_string(Protocol p) {
  switch (p) {
    case Protocol::kLL: return "LL";
    case Protocol::kLL128: return "LL128";
    case Protocol::kSimple: return "Simple";
  }
  return "Simple";
}

std::optional<CollectiveAlgorithm> parse_collective_algorithm(const std::string& name) {
  for (CollectiveAlgorithm a : {CollectiveAlgorithm::kRing, CollectiveAlgorithm::kTree,
                                CollectiveAlgorithm::kNvls, CollectiveAlgorithm::kNvlsTree,
                                CollectiveAlgorithm::kHierarchical, CollectiveAlgorithm::kDirect}) {
    if (name == to_string(a)) return a;
  }
  return std::nullopt;
}

}  // namespace strata::topo
