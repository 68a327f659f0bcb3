#include "runtime/comm/self_communicator.h"

#include <cstdlib>

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "runtime/comm/comm_checks.h"

namespace strata::rt {
namespace {

// Local copies complete in device order, so a request is complete when started.
struct DoneRequest final : Request {
  void wait() override {}
  bool test() override { return true; }
};

class SelfCommunicator final : public Communicator {
 public:
  SelfCommunicator(Device& device, std::chrono::milliseconds timeout)
      : Communicator(timeout), device_(device) {}

  Backend backend() const override { return device_.backend(); }
  const char* transport() const override { return "self"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Device& device() const override { return device_; }

  std::unique_ptr<Request> start_all_reduce(const TensorView& send, const TensorView& recv,
                                            ReduceOp /*op*/) override {
    comm_check::same_shape("all_reduce", send, recv);
    return copy(send, recv);
  }
  std::unique_ptr<Request> start_all_gather(const TensorView& send,
                                            const TensorView& recv) override {
    comm_check::gather_shape(send, recv, 1);
    return copy(send, recv);
  }
  std::unique_ptr<Request> start_reduce_scatter(const TensorView& send,
                                                const TensorView& recv) override {
    comm_check::scatter_shape(send, recv, 1);
    return copy(send, recv);
  }
  std::unique_ptr<Request> start_broadcast(const TensorView& /*buffer*/, int root) override {
    comm_check::root("broadcast", root, 1);
    return std::make_unique<DoneRequest>();
  }
  std::unique_ptr<Request> start_all_to_all(const TensorView& send,
                                            const TensorView& recv) override {
    comm_check::all_to_all_shape(send, recv, 1);
    return copy(send, recv);
  }
  std::unique_ptr<Request> start_all_to_all_v(const TensorView& send, const std::vector<std::int64_t>& send_counts,
                                              const TensorView& recv,
                                              const std::vector<std::int64_t>& recv_counts) override {
    comm_check::all_to_all_v_shape(send, send_counts, recv, recv_counts, 1);
    if (send_counts[0] != recv_counts[0]) {
      throw InternalError(fmt::format("all_to_all_v: a group of one sends itself {} elements and expects {}",
                                      send_counts[0], recv_counts[0]));
    }
    return copy(send.slice(0, send_counts[0]), recv.slice(0, recv_counts[0]));
  }
  std::unique_ptr<Request> start_send(const TensorView& /*buffer*/, int peer, int /*tag*/) override {
    comm_check::peer("send", peer, 0, 1);  // always throws: a group of one has no peer
    return nullptr;
  }
  std::unique_ptr<Request> start_recv(const TensorView& /*buffer*/, int peer, int /*tag*/) override {
    comm_check::peer("recv", peer, 0, 1);
    return nullptr;
  }
  void barrier() override {}
  std::unique_ptr<Communicator> split(int color, int /*key*/) override {
    if (color < 0) return nullptr;
    return std::make_unique<SelfCommunicator>(device_, timeout());
  }
  [[noreturn]] void abort(const std::string& reason) override {
    spdlog::error("aborting: {}", reason);
    spdlog::default_logger()->flush();
    std::_Exit(kExitInternal);
  }

 private:
  std::unique_ptr<Request> copy(const TensorView& send, const TensorView& recv) {
    if (send.data != recv.data) {
      device_.copy_on_device(send.data, recv.data, static_cast<std::size_t>(send.bytes()));
    }
    return std::make_unique<DoneRequest>();
  }

  Device& device_;
};

}  // namespace

std::unique_ptr<Communicator> make_self_communicator(Device& device, const CommOptions& options) {
  return std::make_unique<SelfCommunicator>(device, options.timeout);
}

}  // namespace strata::rt
