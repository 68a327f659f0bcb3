// Argument checks shared by every Communicator backend, so a caller's mistake
// (sizes that do not match the group, a peer outside it) is reported the same
// way everywhere, as InternalError naming the operation, before anything starts.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/device/device.h"

namespace strata::rt::comm_check {

// send and recv hold the same numel and dtype.
void same_shape(const char* op, const TensorView& send, const TensorView& recv);
// recv.numel == send.numel * size (all-gather), send.numel == recv.numel * size
// (reduce-scatter), equal numels divisible by size (all-to-all); dtypes equal.
void gather_shape(const TensorView& send, const TensorView& recv, int size);
void scatter_shape(const TensorView& send, const TensorView& recv, int size);
void all_to_all_shape(const TensorView& send, const TensorView& recv, int size);
// The counts of an uneven all-to-all: one per rank, none negative, their sums
// within send and recv; the buffers of one dtype and apart. Returns each side's
// block offsets (element offsets, in rank order).
struct AllToAllVOffsets {
  std::vector<std::int64_t> send, recv;
};
AllToAllVOffsets all_to_all_v_shape(const TensorView& send, const std::vector<std::int64_t>& send_counts,
                                    const TensorView& recv, const std::vector<std::int64_t>& recv_counts, int size);
// 0 <= rank < size.
void root(const char* op, int root, int size);
// A peer in the group other than self.
void peer(const char* op, int peer, int self, int size);
// Bytes of a view, for messages.
std::int64_t bytes(const TensorView& v);

}  // namespace strata::rt::comm_check
