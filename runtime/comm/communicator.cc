// The Communicator operations every backend gets from the others (communicator.h).
#include "runtime/comm/communicator.h"

#include <utility>

namespace strata::rt {
namespace {

// Both halves of a ring step; done when both are.
class SendRecvRequest final : public Request {
 public:
  SendRecvRequest(std::unique_ptr<Request> recv, std::unique_ptr<Request> send)
      : recv_(std::move(recv)), send_(std::move(send)) {}
  void wait() override {
    recv_->wait();
    send_->wait();
  }
  bool test() override {
    const bool received = recv_->test();
    const bool sent = send_->test();
    return received && sent;
  }

 private:
  std::unique_ptr<Request> recv_, send_;
};

}  // namespace

std::unique_ptr<Request> Communicator::start_send_recv(const TensorView& send, int send_peer, const TensorView& recv,
                                                       int recv_peer, int tag) {
  std::unique_ptr<Request> r = start_recv(recv, recv_peer, tag);
  std::unique_ptr<Request> s = start_send(send, send_peer, tag);
  return std::make_unique<SendRecvRequest>(std::move(r), std::move(s));
}

}  // namespace strata::rt
