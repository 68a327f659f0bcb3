// A group of ranks that exchange tensors: collectives, point-to-point and splits.
//
// Backends: cpu -> OpenMPI (one process per rank); cuda -> NCCL (one process per
// GPU bootstrapped through MPI, or one process driving all local GPUs); a group
// of one rank (a plain run without mpirun) -> local copies on its device.
//
// Contracts every backend keeps:
//   - Buffers are device memory of the communicator's device (TensorView), of
//     a dtype the backend can reduce (cpu: fp32; cuda: bf16, fp16, fp32).
//   - Collectives must be started in the same order on every rank of the group
//     (as MPI and NCCL require). Results repeat run to run for the same group
//     and message size (the library picks the same algorithm), but the order
//     of a sum over ranks is the library's: compare against a single-rank
//     result within fp32 rounding, not bit for bit.
//   - Nothing waits forever: every wait polls against the communicator's
//     timeout and throws CommError naming the operation, the peer or group and
//     the time waited. After a CommError the communicator is unusable: call
//     abort() (which ends every rank of the job) or let the process exit.
//   - Every started Request must be waited on before the buffers it uses are
//     freed or reused, and must not outlive its communicator; a Request
//     destroyed unwaited waits (up to the timeout) and logs any failure, since
//     MPI/NCCL cannot cancel a collective. After a timeout on MPI the request
//     stays valid: a late peer can still be waited for with a longer timeout.
//
// Thread safety: a Communicator and its Requests are used by one host thread.
// (One process driving several GPUs uses one thread per communicator.)
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "runtime/device/backend.h"
#include "runtime/device/device.h"

namespace strata::rt {

// A collective or point-to-point operation failed or timed out (exit code 1).
class CommError : public InternalError {
 public:
  explicit CommError(const std::string& message) : InternalError(message) {}
};

enum class ReduceOp { kSum, kMax };

// A started non-blocking operation.
class Request {
 public:
  virtual ~Request() = default;
  // Blocks until the operation completes; throws CommError past the
  // communicator's timeout (its value when wait is called) or when a peer
  // failed. Idempotent once complete.
  virtual void wait() = 0;
  // True once complete; never blocks (drives MPI progress).
  virtual bool test() = 0;
};

struct CommOptions {
  // How long any single wait may take before it fails. Default 5 minutes: longer
  // than any collective of a training step, short enough that a hung job ends.
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual Backend backend() const = 0;
  // "mpi" | "nccl" | "self".
  virtual const char* transport() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The device whose memory the buffers live in.
  virtual Device& device() const = 0;
  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }

  // ---- Non-blocking operations (buffers untouched by the caller until wait) ----
  // recv = op over ranks of send; same numel and dtype; recv may alias send (in place).
  virtual std::unique_ptr<Request> start_all_reduce(const TensorView& send,
                                                    const TensorView& recv, ReduceOp op) = 0;
  // recv [size * n] = concatenation of every rank's send [n] in rank order. In
  // place when send is recv.slice(rank * n, n).
  virtual std::unique_ptr<Request> start_all_gather(const TensorView& send,
                                                    const TensorView& recv) = 0;
  // recv [n] = sum over ranks of send[rank * n, (rank + 1) * n); send is [size * n].
  virtual std::unique_ptr<Request> start_reduce_scatter(const TensorView& send,
                                                        const TensorView& recv) = 0;
  // buffer on every rank = buffer on root.
  virtual std::unique_ptr<Request> start_broadcast(const TensorView& buffer, int root) = 0;
  // send and recv are [size * n]; block j of send goes to rank j, and block i of
  // recv comes from rank i. send and recv must not overlap.
  virtual std::unique_ptr<Request> start_all_to_all(const TensorView& send,
                                                    const TensorView& recv) = 0;
  // The uneven all-to-all (MPI_Alltoallv; an MoE layer's token dispatch and
  // combine): send_counts[j] elements of send go to rank j, recv_counts[i] come
  // from rank i, each side's blocks back to back in rank order (block j of send
  // starts at the sum of the counts before it). Every rank passes the counts that
  // match its peers' (rank j's send_counts[i] == rank i's recv_counts[j]); the
  // sends must fit send and the receives recv, which must not overlap.
  virtual std::unique_ptr<Request> start_all_to_all_v(const TensorView& send,
                                                      const std::vector<std::int64_t>& send_counts,
                                                      const TensorView& recv,
                                                      const std::vector<std::int64_t>& recv_counts) = 0;
  // Point-to-point to/from peer (a rank of this group, not this rank). MPI
  // matches by tag; NCCL ignores tags and matches per peer in posting order, so
  // post sends and receives between two ranks in the same order on both.
  virtual std::unique_ptr<Request> start_send(const TensorView& buffer, int peer, int tag) = 0;
  virtual std::unique_ptr<Request> start_recv(const TensorView& buffer, int peer, int tag) = 0;
  // One step of a ring: send to send_peer and receive from recv_peer as one
  // operation (torch's batch_isend_irecv, as Megatron-Core's context-parallel
  // ring posts it). The default posts the receive, then the send; NCCL groups
  // the two, since a ring of ranks that each block in their send first would
  // never reach the receives. send and recv must not overlap.
  virtual std::unique_ptr<Request> start_send_recv(const TensorView& send, int send_peer, const TensorView& recv,
                                                   int recv_peer, int tag);

  // ---- Blocking forms: start, then wait ----------------------------------------
  void all_reduce(const TensorView& send, const TensorView& recv, ReduceOp op = ReduceOp::kSum) {
    start_all_reduce(send, recv, op)->wait();
  }
  void all_gather(const TensorView& send, const TensorView& recv) {
    start_all_gather(send, recv)->wait();
  }
  void reduce_scatter(const TensorView& send, const TensorView& recv) {
    start_reduce_scatter(send, recv)->wait();
  }
  void broadcast(const TensorView& buffer, int root) { start_broadcast(buffer, root)->wait(); }
  void all_to_all(const TensorView& send, const TensorView& recv) {
    start_all_to_all(send, recv)->wait();
  }
  void all_to_all_v(const TensorView& send, const std::vector<std::int64_t>& send_counts, const TensorView& recv,
                    const std::vector<std::int64_t>& recv_counts) {
    start_all_to_all_v(send, send_counts, recv, recv_counts)->wait();
  }
  void send(const TensorView& buffer, int peer, int tag = 0) {
    start_send(buffer, peer, tag)->wait();
  }
  void recv(const TensorView& buffer, int peer, int tag = 0) {
    start_recv(buffer, peer, tag)->wait();
  }

  // Returns when every rank of the group has entered; CommError past the timeout.
  virtual void barrier() = 0;

  // Collective over this group: ranks passing the same color >= 0 form a new
  // group, ordered by key (ties by rank here). color < 0: this rank joins no
  // group and gets nullptr. The new group inherits the timeout.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;

  // Ends the whole job now (MPI_Abort / ncclCommAbort then exit) after logging
  // reason: the clean way out after a CommError, so no other rank waits forever.
  [[noreturn]] virtual void abort(const std::string& reason) = 0;

 protected:
  explicit Communicator(std::chrono::milliseconds timeout) : timeout_(timeout) {}

 private:
  std::chrono::milliseconds timeout_;
};

// The communicator over every rank of this launch, using device's memory:
//   cpu  - MPI_COMM_WORLD (needs an active MpiSession when launched under mpirun);
//   cuda - NCCL over all ranks, its unique id broadcast over MPI;
//   a one-rank "self" communicator when the process was not launched under a
//   multi-rank launcher (detect_launch().size == 1).
// Throws InputError when launched with several ranks but this build lacks MPI or
// the backend's transport; InternalError when MPI was not initialized first.
std::unique_ptr<Communicator> make_world_communicator(Device& device,
                                                      const CommOptions& options = {});

// One process driving several local GPUs without MPI (ncclCommInitAll): result[i]
// is rank i, on devices[i] (all cuda). Throws InputError without the cuda backend.
std::vector<std::unique_ptr<Communicator>> make_local_communicators(
    const std::vector<Device*>& devices, const CommOptions& options = {});

}  // namespace strata::rt
