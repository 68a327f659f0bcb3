// Names of the collective operations, shared by the topology model (how long a
// collective takes on the wires), calibration (what was measured) and the runtime
// (what is run). nccl-tests' algbw/busbw conventions are documented beside each.
#pragma once

#include <optional>
#include <string>

namespace strata {

enum class CollectiveOp {
  kAllReduce,      // busbw = algbw * 2(n-1)/n
  kAllGather,      // busbw = algbw * (n-1)/n; bytes = the gathered (output) size
  kReduceScatter,  // busbw = algbw * (n-1)/n; bytes = the input size
  kBroadcast,      // busbw = algbw
  kAllToAll,       // busbw = algbw * (n-1)/n
  kSendRecv,       // busbw = algbw
};

inline const char* to_string(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllReduce: return "all_reduce";
    case CollectiveOp::kAllGather: return "all_gather";
    case CollectiveOp::kReduceScatter: return "reduce_scatter";
    case CollectiveOp::kBroadcast: return "broadcast";
    case CollectiveOp::kAllToAll: return "all_to_all";
    case CollectiveOp::kSendRecv: return "send_recv";
  }
  return "all_reduce";
}

inline std::optional<CollectiveOp> parse_collective_op(const std::string& s) {
  for (CollectiveOp op : {CollectiveOp::kAllReduce, CollectiveOp::kAllGather,
                          CollectiveOp::kReduceScatter, CollectiveOp::kBroadcast,
                          CollectiveOp::kAllToAll, CollectiveOp::kSendRecv}) {
    if (s == to_string(op)) return op;
  }
  return std::nullopt;
}

// nccl-tests' bus-bandwidth factor: busbw = algbw * factor, algbw = bytes / time.
inline double busbw_factor(CollectiveOp op, int group_size) {
  const double n = group_size;
  switch (op) {
    case CollectiveOp::kAllReduce: return 2.0 * (n - 1.0) / n;
    case CollectiveOp::kAllGather:
    case CollectiveOp::kReduceScatter:
    case CollectiveOp::kAllToAll: return (n - 1.0) / n;
    case CollectiveOp::kBroadcast:
    case CollectiveOp::kSendRecv: return 1.0;
  }
  return 1.0;
}

}  // namespace strata
