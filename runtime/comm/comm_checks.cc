#include "runtime/comm/comm_checks.h"

#include <fmt/format.h>

#include "core/error.h"

namespace strata::rt::comm_check {
namespace {

[[noreturn]] void fail(const char* op, const std::string& message) {
  throw InternalError(fmt::format("{}: {}", op, message));
}

void same_dtype(const char* op, const TensorView& send, const TensorView& recv) {
  if (send.dtype != recv.dtype) {
    fail(op, fmt::format("send is {} but recv is {}", to_string(send.dtype), to_string(recv.dtype)));
  }
}

}  // namespace

void same_shape(const char* op, const TensorView& send, const TensorView& recv) {
  same_dtype(op, send, recv);
  if (send.numel != recv.numel) {
    fail(op, fmt::format("send has {} elements but recv has {}", send.numel, recv.numel));
  }
}

void gather_shape(const TensorView& send, const TensorView& recv, int size) {
  same_dtype("all_gather", send, recv);
  if (recv.numel != send.numel * size) {
    fail("all_gather", fmt::format("recv has {} elements; it must be {} ranks x {} = {}",
                                   recv.numel, size, send.numel, send.numel * size));
  }
}

void scatter_shape(const TensorView& send, const TensorView& recv, int size) {
  same_dtype("reduce_scatter", send, recv);
  if (send.numel != recv.numel * size) {
    fail("reduce_scatter", fmt::format("send has {} elements; it must be {} ranks x {} = {}",
                                       send.numel, size, recv.numel, recv.numel * size));
  }
}

void all_to_all_shape(const TensorView& send, const TensorView& recv, int size) {
  same_shape("all_to_all", send, recv);
  if (send.numel % size != 0) {
    fail("all_to_all", fmt::format("{} elements do not split into {} equal blocks", send.numel, size));
  }
  const char* s = static_cast<const char*>(send.data);
  const char* r = static_cast<const char*>(recv.data);
  if (send.numel > 0 && s < r + bytes(recv) && r < s + bytes(send)) {
    fail("all_to_all", "send and recv overlap");
  }
}

void root(const char* op, int root_rank, int size) {
  if (root_rank < 0 || root_rank >= size) {
    fail(op, fmt::format("root {} is not a rank of this group of {}", root_rank, size));
  }
}

void peer(const char* op, int peer_rank, int self, int size) {
  if (peer_rank < 0 || peer_rank >= size || peer_rank == self) {
    fail(op, fmt::format("peer {} is not another rank of this group of {} (this rank is {})",
                         peer_rank, size, self));
  }
}

std::int64_t bytes(const TensorView& v) { return v.bytes(); }

}  // namespace strata::rt::comm_check
