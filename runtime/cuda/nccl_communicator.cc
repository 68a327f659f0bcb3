// The cuda backend's Communicator: NCCL on a stream of its own, ordered after the
// device's stream, with every wait polled against the timeout. On a timeout the
// NCCL communicator is aborted (ncclCommAbort) so that no kernel spins forever.
// Communicators are created in NCCL's non-blocking mode (config.blocking = 0) so
// that initialization and splits can time out too.
#include <nccl.h>

#include <cstdlib>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "runtime/comm/comm_checks.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/cuda/cuda_device_impl.h"
#include "runtime/launch/mpi_env.h"
#include "runtime/comm/poll.h"

#if defined(STRATA_RT_HAVE_MPI)
#include <mpi.h>
#endif

namespace strata::rt {
namespace {

ncclDataType_t nccl_type(const char* op, const TensorView& v) {
  switch (v.dtype) {
    case DType::kBf16: return ncclBfloat16;
    case DType::kFp16: return ncclFloat16;
    case DType::kFp32:
    case DType::kTf32: return ncclFloat32;
  }
  throw InternalError(fmt::format("{}: no NCCL type for {}", op, to_string(v.dtype)));
}

// Waits until comm has finished its last non-blocking call (ncclInProgress),
// throwing CommError (after aborting comm on a timeout) on failure.
void settle(ncclComm_t comm, ncclResult_t started, std::chrono::milliseconds timeout,
            const std::string& what) {
  if (started != ncclSuccess && started != ncclInProgress) {
    throw CommError(fmt::format("{} failed: {}", what, ncclGetErrorString(started)));
  }
  if (started == ncclSuccess) return;
  ncclResult_t state = ncclInProgress;
  try {
    poll_until(
        [&] {
          ncclCommGetAsyncError(comm, &state);
          return state != ncclInProgress;
        },
        timeout, [&] { return what; });
  } catch (const CommError&) {
    ncclCommAbort(comm);
    throw;
  }
  if (state != ncclSuccess) {
    throw CommError(fmt::format("{} failed: {}", what, ncclGetErrorString(state)));
  }
}

class NcclRequest final : public Request {
 public:
  // owner: whose timeout (as set when wait() is called) bounds each wait.
  NcclRequest(const Communicator& owner, ncclComm_t comm, int ordinal, cudaEvent_t done,
              std::string what)
      : owner_(owner), comm_(comm), ordinal_(ordinal), done_event_(done), what_(std::move(what)) {}
  ~NcclRequest() override {
    if (!complete_ && !failed_) {
      try {
        wait_within(unwaited_request_budget(owner_.timeout()));  // runtime/comm/poll.h
      } catch (const std::exception& e) {
        spdlog::error("unwaited {} failed: {}", what_, e.what());
      }
    }
    cudaSetDevice(ordinal_);
    cudaEventDestroy(done_event_);
  }

  void wait() override { wait_within(owner_.timeout()); }

  void wait_within(std::chrono::milliseconds timeout) {
    if (complete_) return;
    try {
      poll_until([this] { return test(); }, timeout, [this] { return what_; });
    } catch (const CommError&) {
      failed_ = true;
      ncclCommAbort(comm_);  // stop NCCL kernels that would otherwise spin forever
      throw;
    }
  }

  bool test() override {
    if (complete_) return true;
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm_, &async);
    if (async != ncclSuccess && async != ncclInProgress) {
      failed_ = true;
      throw CommError(fmt::format("{} failed: {}", what_, ncclGetErrorString(async)));
    }
    cudaSetDevice(ordinal_);
    const cudaError_t q = cudaEventQuery(done_event_);
    if (q == cudaSuccess) {
      complete_ = true;
    } else if (q != cudaErrorNotReady) {
      failed_ = true;
      throw CommError(fmt::format("{} failed: {}", what_, cudaGetErrorString(q)));
    }
    return complete_;
  }

 private:
  const Communicator& owner_;
  ncclComm_t comm_;
  int ordinal_;
  cudaEvent_t done_event_;
  std::string what_;
  bool complete_ = false;
  bool failed_ = false;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(CudaDevice& device, ncclComm_t comm, std::chrono::milliseconds timeout)
      : Communicator(timeout), device_(device), comm_(comm) {
    device_.activate();
    ncclCommUserRank(comm_, &rank_);
    ncclCommCount(comm_, &size_);
    cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    cuda_check(cudaMalloc(&barrier_word_, sizeof(float)), "cudaMalloc(barrier word)");
    cuda_check(cudaMemset(barrier_word_, 0, sizeof(float)), "cudaMemset(barrier word)");
  }
  ~NcclCommunicator() override {
    cudaSetDevice(device_.ordinal());
    if (!aborted_) {
      cudaStreamSynchronize(stream_);
      // Non-blocking communicators finish their work with ncclCommFinalize,
      // polled to completion (bounded by the timeout), before ncclCommDestroy.
      try {
        settle(comm_, ncclCommFinalize(comm_), timeout(), describe("finalize", 0));
        ncclCommDestroy(comm_);
      } catch (const std::exception& e) {
        spdlog::error("{}", e.what());  // settle aborted the communicator on a timeout
      }
    }
    cudaFree(barrier_word_);
    cudaStreamDestroy(stream_);
  }

  Backend backend() const override { return Backend::kCuda; }
  const char* transport() const override { return "nccl"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Device& device() const override { return device_; }

  std::unique_ptr<Request> start_all_reduce(const TensorView& send, const TensorView& recv,
                                            ReduceOp op) override {
    comm_check::same_shape("all_reduce", send, recv);
    return launch("all_reduce", recv.bytes(), [&](cudaStream_t s) {
      return ncclAllReduce(send.data, recv.data, static_cast<std::size_t>(recv.numel),
                           nccl_type("all_reduce", recv), op == ReduceOp::kSum ? ncclSum : ncclMax,
                           comm_, s);
    });
  }

  std::unique_ptr<Request> start_all_gather(const TensorView& send,
                                            const TensorView& recv) override {
    comm_check::gather_shape(send, recv, size_);
    return launch("all_gather", recv.bytes(), [&](cudaStream_t s) {
      return ncclAllGather(send.data, recv.data, static_cast<std::size_t>(send.numel),
                           nccl_type("all_gather", send), comm_, s);
    });
  }

  std::unique_ptr<Request> start_reduce_scatter(const TensorView& send,
                                                const TensorView& recv) override {
    comm_check::scatter_shape(send, recv, size_);
    return launch("reduce_scatter", send.bytes(), [&](cudaStream_t s) {
      return ncclReduceScatter(send.data, recv.data, static_cast<std::size_t>(recv.numel),
                               nccl_type("reduce_scatter", send), ncclSum, comm_, s);
    });
  }

  std::unique_ptr<Request> start_broadcast(const TensorView& buffer, int root) override {
    comm_check::root("broadcast", root, size_);
    return launch("broadcast", buffer.bytes(), [&](cudaStream_t s) {
      return ncclBroadcast(buffer.data, buffer.data, static_cast<std::size_t>(buffer.numel),
                           nccl_type("broadcast", buffer), root, comm_, s);
    });
  }

  std::unique_ptr<Request> start_all_to_all(const TensorView& send,
                                            const TensorView& recv) override {
    comm_check::all_to_all_shape(send, recv, size_);
    const std::int64_t n = send.numel / size_;
    const ncclDataType_t type = nccl_type("all_to_all", send);
    return launch("all_to_all", send.bytes(), [&](cudaStream_t s) {
      ncclResult_t r = ncclGroupStart();
      for (int p = 0; p < size_ && (r == ncclSuccess || r == ncclInProgress); ++p) {
        r = ncclSend(send.slice(p * n, n).data, static_cast<std::size_t>(n), type, p, comm_, s);
        if (r == ncclSuccess || r == ncclInProgress) {
          r = ncclRecv(recv.slice(p * n, n).data, static_cast<std::size_t>(n), type, p, comm_, s);
        }
      }
      const ncclResult_t end = ncclGroupEnd();
      return (r == ncclSuccess || r == ncclInProgress) ? end : r;
    });
  }

  std::unique_ptr<Request> start_all_to_all_v(const TensorView& send, const std::vector<std::int64_t>& send_counts,
                                              const TensorView& recv,
                                              const std::vector<std::int64_t>& recv_counts) override {
    const comm_check::AllToAllVOffsets at = comm_check::all_to_all_v_shape(send, send_counts, recv, recv_counts, size_);
    const ncclDataType_t type = nccl_type("all_to_all_v", send);
    // One group of a send and a receive per peer with data (NCCL's all-to-all
    // recipe; zero-count blocks are skipped, as both sides know them).
    return launch("all_to_all_v", send.bytes(), [&](cudaStream_t s) {
      ncclResult_t r = ncclGroupStart();
      for (int p = 0; p < size_ && (r == ncclSuccess || r == ncclInProgress); ++p) {
        if (send_counts[p] > 0) {
          r = ncclSend(send.slice(at.send[p], send_counts[p]).data, static_cast<std::size_t>(send_counts[p]), type, p,
                       comm_, s);
        }
        if ((r == ncclSuccess || r == ncclInProgress) && recv_counts[p] > 0) {
          r = ncclRecv(recv.slice(at.recv[p], recv_counts[p]).data, static_cast<std::size_t>(recv_counts[p]), type, p,
                       comm_, s);
        }
      }
      const ncclResult_t end = ncclGroupEnd();
      return (r == ncclSuccess || r == ncclInProgress) ? end : r;
    });
  }

  std::unique_ptr<Request> start_send(const TensorView& buffer, int peer, int tag) override {
    comm_check::peer("send", peer, rank_, size_);
    return launch(fmt::format("send to rank {} (tag {})", peer, tag), buffer.bytes(),
                  [&](cudaStream_t s) {
                    return ncclSend(buffer.data, static_cast<std::size_t>(buffer.numel),
                                    nccl_type("send", buffer), peer, comm_, s);
                  });
  }

  std::unique_ptr<Request> start_recv(const TensorView& buffer, int peer, int tag) override {
    comm_check::peer("recv", peer, rank_, size_);
    return launch(fmt::format("recv from rank {} (tag {})", peer, tag), buffer.bytes(),
                  [&](cudaStream_t s) {
                    return ncclRecv(buffer.data, static_cast<std::size_t>(buffer.numel),
                                    nccl_type("recv", buffer), peer, comm_, s);
                  });
  }

  std::unique_ptr<Request> start_send_recv(const TensorView& send, int send_peer, const TensorView& recv,
                                           int recv_peer, int tag) override {
    comm_check::peer("send", send_peer, rank_, size_);
    comm_check::peer("recv", recv_peer, rank_, size_);
    return launch(fmt::format("send to rank {} and recv from rank {} (tag {})", send_peer, recv_peer, tag),
                  send.bytes() + recv.bytes(), [&](cudaStream_t s) {
                    // One group: every rank of a ring sends and receives at once.
                    ncclResult_t r = ncclGroupStart();
                    if (r == ncclSuccess || r == ncclInProgress) {
                      r = ncclSend(send.data, static_cast<std::size_t>(send.numel), nccl_type("send", send),
                                   send_peer, comm_, s);
                    }
                    if (r == ncclSuccess || r == ncclInProgress) {
                      r = ncclRecv(recv.data, static_cast<std::size_t>(recv.numel), nccl_type("recv", recv),
                                   recv_peer, comm_, s);
                    }
                    const ncclResult_t end = ncclGroupEnd();
                    return (r == ncclSuccess || r == ncclInProgress) ? end : r;
                  });
  }

  void barrier() override {
    // NCCL has no barrier: an all-reduce of one word is one.
    const TensorView word{barrier_word_, DType::kFp32, 1};
    start_all_reduce(word, word, ReduceOp::kSum)->wait();
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t child = nullptr;
    device_.activate();
    const ncclResult_t r =
        ncclCommSplit(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &child, &config);
    settle(comm_, r, timeout(), describe("split", 0));
    if (child == nullptr) return nullptr;
    settle(child, ncclInProgress, timeout(), describe("split (new group)", 0));
    return std::make_unique<NcclCommunicator>(device_, child, timeout());
  }

  [[noreturn]] void abort(const std::string& reason) override {
    spdlog::error("rank {} aborting the job: {}", rank_, reason);
    spdlog::default_logger()->flush();
    if (!aborted_) ncclCommAbort(comm_);
    aborted_ = true;
#if defined(STRATA_RT_HAVE_MPI)
    if (MpiSession::active()) MPI_Abort(MPI_COMM_WORLD, kExitInternal);
#endif
    std::_Exit(kExitInternal);
  }

 private:
  std::string describe(const std::string& op, std::int64_t bytes) const {
    return fmt::format("NCCL {} of {} bytes on rank {} of a group of {} (GPU {})", op, bytes,
                       rank_, size_, device_.ordinal());
  }

  // Orders the comm stream after the work issued so far on the device, issues
  // the NCCL call and records its completion.
  template <class Issue>
  std::unique_ptr<Request> launch(const std::string& op, std::int64_t bytes, Issue&& issue) {
    device_.activate();
    const std::string what = describe(op, bytes);
    cudaEvent_t ready = nullptr;
    cuda_check(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreate");
    cuda_check(cudaEventRecord(ready, device_.stream()), "cudaEventRecord");
    cuda_check(cudaStreamWaitEvent(stream_, ready, 0), "cudaStreamWaitEvent");
    cudaEventDestroy(ready);  // released once the wait has been enqueued
    settle(comm_, issue(stream_), timeout(), what);
    cudaEvent_t done = nullptr;
    cuda_check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
    cuda_check(cudaEventRecord(done, stream_), "cudaEventRecord");
    return std::make_unique<NcclRequest>(*this, comm_, device_.ordinal(), done, what);
  }

  CudaDevice& device_;
  ncclComm_t comm_;
  cudaStream_t stream_ = nullptr;
  void* barrier_word_ = nullptr;
  int rank_ = 0;
  int size_ = 1;
  bool aborted_ = false;
};

CudaDevice& as_cuda(Device& device) {
  auto* cuda = dynamic_cast<CudaDevice*>(&device);
  if (cuda == nullptr) throw InternalError("the NCCL communicator needs a cuda device");
  return *cuda;
}

}  // namespace

std::unique_ptr<Communicator> make_nccl_world_communicator(Device& device,
                                                           const CommOptions& options) {
#if defined(STRATA_RT_HAVE_MPI)
  CudaDevice& cuda = as_cuda(device);
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  ncclUniqueId id{};
  if (rank == 0) {
    const ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) {
      throw CommError(fmt::format("ncclGetUniqueId failed: {}", ncclGetErrorString(r)));
    }
  }
  MPI_Request request = MPI_REQUEST_NULL;
  if (MPI_Ibcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD, &request) != MPI_SUCCESS) {
    throw CommError("MPI_Ibcast of the NCCL unique id could not start");
  }
  poll_until(
      [&] {
        int flag = 0;
        MPI_Test(&request, &flag, MPI_STATUS_IGNORE);
        return flag != 0;
      },
      options.timeout, [&] { return fmt::format("broadcast of the NCCL unique id to rank {}", rank); });
  cuda.activate();
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const ncclResult_t r = ncclCommInitRankConfig(&comm, size, id, rank, &config);
  settle(comm, r, options.timeout,
         fmt::format("NCCL initialization of rank {} of {} (GPU {})", rank, size, cuda.ordinal()));
  return std::make_unique<NcclCommunicator>(cuda, comm, options.timeout);
#else
  throw InputError("", "", "NCCL across processes is bootstrapped through MPI, which this build lacks");
#endif
}

std::vector<std::unique_ptr<Communicator>> make_nccl_local_communicators(
    const std::vector<Device*>& devices, const CommOptions& options) {
  std::vector<int> ordinals;
  for (Device* d : devices) ordinals.push_back(as_cuda(*d).ordinal());
  std::vector<ncclComm_t> comms(devices.size(), nullptr);
  const ncclResult_t r = ncclCommInitAll(comms.data(), static_cast<int>(comms.size()),
                                         ordinals.data());
  if (r != ncclSuccess) {
    throw CommError(fmt::format("ncclCommInitAll over {} GPUs failed: {}", comms.size(),
                                ncclGetErrorString(r)));
  }
  std::vector<std::unique_ptr<Communicator>> out;
  for (std::size_t i = 0; i < comms.size(); ++i) {
    out.push_back(std::make_unique<NcclCommunicator>(as_cuda(*devices[i]), comms[i], options.timeout));
  }
  return out;
}

}  // namespace strata::rt
