#include "test_clusters.h"

#include <fmt/format.h>

#include "core/json_reader.h"

namespace strata::topo::testing {

ClusterSpec shipped(const std::string& name) { return load_cluster_spec(name); }

ClusterSpec dgx_a100_cluster(int nodes, const std::string& fabric) {
  return cluster_from_text(fmt::format(R"({{"name": "test", "nodes": {}, "gpus_per_node": 8,
      "node": "dgx-a100", "fabric": {}, "profile": "a100-sxm4-80gb"}})",
                                       nodes, fabric));
}

ClusterSpec cluster_from_text(const std::string& text, const std::string& file) {
  return read_cluster_spec(json::parse_text(text, file), file);
}

}  // namespace strata::topo::testing
