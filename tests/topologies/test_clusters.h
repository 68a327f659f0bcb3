// Clusters built in code for the topology tests.
#pragma once

#include <string>

#include "topologies/cluster_spec.h"

namespace strata::topo::testing {

// A shipped cluster (scenarios/clusters/NAME.json).
ClusterSpec shipped(const std::string& name);

// `nodes` DGX A100 nodes on a fabric described by the JSON object text `fabric`.
ClusterSpec dgx_a100_cluster(int nodes, const std::string& fabric);

// Parses a whole cluster.json text; file names it in errors.
ClusterSpec cluster_from_text(const std::string& text, const std::string& file = "cluster.json");

}  // namespace strata::topo::testing
