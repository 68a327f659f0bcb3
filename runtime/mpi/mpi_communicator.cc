#include "runtime/mpi/mpi_communicator.h"

#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <functional>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "runtime/comm/comm_checks.h"
#include "runtime/comm/poll.h"

namespace strata::rt {
namespace {

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, static_cast<std::size_t>(length));
}

MPI_Datatype mpi_type(const char* op, const TensorView& v) {
  // Every cpu tensor is fp32 (runtime/device/device.h); MPI has no bf16/fp16 reduction.
  if (v.dtype == DType::kFp32 || v.dtype == DType::kTf32) return MPI_FLOAT;
  throw InternalError(fmt::format("{}: the MPI communicator moves fp32 tensors, not {}", op,
                                  to_string(v.dtype)));
}

int mpi_count(const char* op, std::int64_t numel) {
  if (numel > std::numeric_limits<int>::max()) {
    throw InternalError(fmt::format("{}: {} elements exceed MPI's int count", op, numel));
  }
  return static_cast<int>(numel);
}

// Requests of one operation; `after` runs once they complete (in-place fix-ups).
class MpiRequest final : public Request {
 public:
  // comm: whose timeout (as set when wait() is called) bounds each wait.
  MpiRequest(std::string what, const Communicator& comm) : what_(std::move(what)), comm_(comm) {}
  ~MpiRequest() override {
    if (done_ || requests_.empty()) return;
    try {
      // Bounded by the shared abort deadline once a wait has failed (runtime/comm/poll.h).
      poll_until([this] { return test(); }, unwaited_request_budget(comm_.timeout()), [this] { return what_; });
    } catch (const std::exception& e) {
      spdlog::error("unwaited {} failed: {}", what_, e.what());
    }
  }

  std::vector<MPI_Request>& requests() { return requests_; }
  void set_after(std::function<void()> after) { after_ = std::move(after); }

  void wait() override {
    if (done_) return;
    poll_until([this] { return test(); }, comm_.timeout(), [this] { return what_; });
  }

  bool test() override {
    if (done_) return true;
    int flag = 0;
    const int rc = MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &flag,
                               MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) {
      done_ = true;  // the requests are dead; do not wait on them again
      throw CommError(fmt::format("{} failed: {}", what_, mpi_error_text(rc)));
    }
    if (flag) {
      done_ = true;
      if (after_) after_();
    }
    return done_;
  }

 private:
  std::string what_;
  const Communicator& comm_;
  std::vector<MPI_Request> requests_;
  std::function<void()> after_;
  bool done_ = false;
};

class MpiCommunicator final : public Communicator {
 public:
  // owns: free comm on destruction (every communicator but MPI_COMM_WORLD).
  MpiCommunicator(Device& device, MPI_Comm comm, bool owns, std::chrono::milliseconds timeout)
      : Communicator(timeout), device_(device), comm_(comm), owns_(owns) {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owns_ && !finalized) MPI_Comm_free(&comm_);
  }

  Backend backend() const override { return Backend::kCpu; }
  const char* transport() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Device& device() const override { return device_; }

  std::unique_ptr<Request> start_all_reduce(const TensorView& send, const TensorView& recv,
                                            ReduceOp op) override {
    comm_check::same_shape("all_reduce", send, recv);
    auto req = request("all_reduce", recv);
    const void* src = send.data == recv.data ? MPI_IN_PLACE : send.data;
    issue(req->requests(), "all_reduce",
          MPI_Iallreduce(src, recv.data, mpi_count("all_reduce", recv.numel),
                         mpi_type("all_reduce", recv), op == ReduceOp::kSum ? MPI_SUM : MPI_MAX,
                         comm_, &req->requests().emplace_back()));
    return req;
  }

  std::unique_ptr<Request> start_all_gather(const TensorView& send,
                                            const TensorView& recv) override {
    comm_check::gather_shape(send, recv, size_);
    auto req = request("all_gather", recv);
    const bool in_place = send.data == recv.slice(rank_ * send.numel, send.numel).data;
    issue(req->requests(), "all_gather",
          MPI_Iallgather(in_place ? MPI_IN_PLACE : send.data, mpi_count("all_gather", send.numel),
                         mpi_type("all_gather", send), recv.data,
                         mpi_count("all_gather", send.numel), mpi_type("all_gather", recv), comm_,
                         &req->requests().emplace_back()));
    return req;
  }

  std::unique_ptr<Request> start_reduce_scatter(const TensorView& send,
                                                const TensorView& recv) override {
    comm_check::scatter_shape(send, recv, size_);
    auto req = request("reduce_scatter", send);
    const int n = mpi_count("reduce_scatter", recv.numel);
    const TensorView own = send.slice(rank_ * recv.numel, recv.numel);
    if (recv.data == own.data) {
      // In place (recv is this rank's block of send): MPI_IN_PLACE leaves the
      // result at the start of send; move it to this rank's block afterwards.
      issue(req->requests(), "reduce_scatter",
            MPI_Ireduce_scatter_block(MPI_IN_PLACE, send.data, n, mpi_type("reduce_scatter", send),
                                      MPI_SUM, comm_, &req->requests().emplace_back()));
      const std::size_t bytes = static_cast<std::size_t>(recv.bytes());
      req->set_after([send, recv, bytes] {
        if (send.data != recv.data) std::memmove(recv.data, send.data, bytes);
      });
    } else {
      issue(req->requests(), "reduce_scatter",
            MPI_Ireduce_scatter_block(send.data, recv.data, n, mpi_type("reduce_scatter", send),
                                      MPI_SUM, comm_, &req->requests().emplace_back()));
    }
    return req;
  }

  std::unique_ptr<Request> start_broadcast(const TensorView& buffer, int root) override {
    comm_check::root("broadcast", root, size_);
    auto req = request("broadcast", buffer);
    issue(req->requests(), "broadcast",
          MPI_Ibcast(buffer.data, mpi_count("broadcast", buffer.numel),
                     mpi_type("broadcast", buffer), root, comm_, &req->requests().emplace_back()));
    return req;
  }

  std::unique_ptr<Request> start_all_to_all(const TensorView& send,
                                            const TensorView& recv) override {
    comm_check::all_to_all_shape(send, recv, size_);
    auto req = request("all_to_all", send);
    const int n = mpi_count("all_to_all", send.numel / size_);
    issue(req->requests(), "all_to_all",
          MPI_Ialltoall(send.data, n, mpi_type("all_to_all", send), recv.data, n,
                        mpi_type("all_to_all", recv), comm_, &req->requests().emplace_back()));
    return req;
  }

  std::unique_ptr<Request> start_all_to_all_v(const TensorView& send, const std::vector<std::int64_t>& send_counts,
                                              const TensorView& recv,
                                              const std::vector<std::int64_t>& recv_counts) override {
    const comm_check::AllToAllVOffsets at = comm_check::all_to_all_v_shape(send, send_counts, recv, recv_counts, size_);
    auto req = request("all_to_all_v", send);
    // MPI's counts and displacements are ints; they live in the request until it completes.
    auto ints = std::make_shared<std::vector<int>>();
    for (const auto* v : {&send_counts, &at.send, &recv_counts, &at.recv}) {
      for (std::int64_t x : *v) ints->push_back(mpi_count("all_to_all_v", x));
    }
    const int* p = ints->data();
    issue(req->requests(), "all_to_all_v",
          MPI_Ialltoallv(send.data, p, p + size_, mpi_type("all_to_all_v", send), recv.data, p + 2 * size_,
                         p + 3 * size_, mpi_type("all_to_all_v", recv), comm_, &req->requests().emplace_back()));
    req->set_after([ints] {});
    return req;
  }

  std::unique_ptr<Request> start_send(const TensorView& buffer, int peer, int tag) override {
    comm_check::peer("send", peer, rank_, size_);
    check_tag("send", tag);
    auto req = request(fmt::format("send to rank {} (tag {})", peer, tag), buffer);
    issue(req->requests(), "send",
          MPI_Isend(buffer.data, mpi_count("send", buffer.numel), mpi_type("send", buffer), peer,
                    tag, comm_, &req->requests().emplace_back()));
    return req;
  }

  std::unique_ptr<Request> start_recv(const TensorView& buffer, int peer, int tag) override {
    comm_check::peer("recv", peer, rank_, size_);
    check_tag("recv", tag);
    auto req = request(fmt::format("recv from rank {} (tag {})", peer, tag), buffer);
    issue(req->requests(), "recv",
          MPI_Irecv(buffer.data, mpi_count("recv", buffer.numel), mpi_type("recv", buffer), peer,
                    tag, comm_, &req->requests().emplace_back()));
    return req;
  }

  void barrier() override {
    auto req = std::make_unique<MpiRequest>(describe("barrier", 0), *this);
    issue(req->requests(), "barrier", MPI_Ibarrier(comm_, &req->requests().emplace_back()));
    req->wait();
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    // MPI_Comm_split blocks with no timeout: meet at a timed barrier first, so a
    // missing rank fails here instead of hanging inside the split.
    barrier();
    MPI_Comm child = MPI_COMM_NULL;
    const int rc = MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &child);
    if (rc != MPI_SUCCESS) {
      throw CommError(fmt::format("{} failed: {}", describe("split", 0), mpi_error_text(rc)));
    }
    if (child == MPI_COMM_NULL) return nullptr;
    return std::make_unique<MpiCommunicator>(device_, child, true, timeout());
  }

  [[noreturn]] void abort(const std::string& reason) override {
    spdlog::error("rank {} aborting the job: {}", rank_, reason);
    spdlog::default_logger()->flush();
    MPI_Abort(MPI_COMM_WORLD, kExitInternal);
    std::_Exit(kExitInternal);  // MPI_Abort does not return; in case it does
  }

 private:
  std::string describe(const std::string& op, std::int64_t bytes) const {
    return fmt::format("MPI {} of {} bytes on rank {} of a group of {}", op, bytes, rank_, size_);
  }

  std::unique_ptr<MpiRequest> request(const std::string& op, const TensorView& v) const {
    return std::make_unique<MpiRequest>(describe(op, v.bytes()), *this);
  }

  // A failed MPI_I* call leaves no request to wait on.
  void issue(std::vector<MPI_Request>& requests, const char* op, int rc) const {
    if (rc != MPI_SUCCESS) {
      requests.clear();
      throw CommError(fmt::format("MPI {} on rank {} could not start: {}", op, rank_,
                                  mpi_error_text(rc)));
    }
  }

  static void check_tag(const char* op, int tag) {
    // MPI guarantees tags up to 32767 (MPI_TAG_UB is at least that).
    if (tag < 0 || tag > 32767) {
      throw InternalError(fmt::format("{}: tag {} is outside [0, 32767]", op, tag));
    }
  }

  Device& device_;
  MPI_Comm comm_;
  bool owns_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_world_communicator(Device& device,
                                                          const CommOptions& options) {
  if (device.backend() != Backend::kCpu) {
    throw InternalError("the MPI communicator moves cpu tensors; cuda ranks use NCCL");
  }
  return std::make_unique<MpiCommunicator>(device, MPI_COMM_WORLD, false, options.timeout);
}

}  // namespace strata::rt
