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

AllToAllVOffsets all_to_all_v_shape(const TensorView& send, const std::vector<std::int64_t>& send_counts,
                                    const TensorView& recv, const std::vector<std::int64_t>& recv_counts, int size) {
  const char* op = "all_to_all_v";
  if (send.dtype != recv.dtype) {
    fail(op, fmt::format("send is {} and recv is {}", to_string(send.dtype), to_string(recv.dtype)));
  }
  AllToAllVOffsets offsets;
  auto sum_up = [&](const std::vector<std::int64_t>& counts, const TensorView& buffer, const char* side,
                    std::vector<std::int64_t>& out) {
    if (static_cast<int>(counts.size()) != size) {
      fail(op, fmt::format("{} {} counts for a group of {} ranks", counts.size(), side, size));
    }
    std::int64_t at = 0;
    for (std::int64_t c : counts) {
      if (c < 0) fail(op, fmt::format("a negative {} count ({})", side, c));
      out.push_back(at);
      at += c;
    }
    if (at > buffer.numel) {
      fail(op, fmt::format("the {} counts add up to {} elements; the buffer holds {}", side, at, buffer.numel));
    }
  };
  sum_up(send_counts, send, "send", offsets.send);
  sum_up(recv_counts, recv, "recv", offsets.recv);
  const char* s = static_cast<const char*>(send.data);
  const char* r = static_cast<const char*>(recv.data);
  if (send.numel > 0 && recv.numel > 0 && s < r + bytes(recv) && r < s + bytes(send)) {
    fail(op, "send and recv overlap");
  }
  return offsets;
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
