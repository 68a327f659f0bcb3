// An MoE layer's routing (runtime/executor/moe_routing.h) against hand-computed
// decisions and the Switch Transformer's balance property, its router gradient
// against finite differences, and the whole MoE MLP's backward (runtime/
// executor/moe_layer.h) against finite differences of its forward on one rank:
// the sharded runs are checked against this one-rank layer
// (executor_correctness_test.cc), so this is what makes the reference right.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "runtime/comm/self_communicator.h"
#include "runtime/device/random.h"
#include "runtime/device/tensor_io.h"
#include "runtime/executor/moe_layer.h"
#include "runtime/executor/param_layout.h"
#include "runtime/executor/recorder.h"
#include "runtime/executor/transformer_layer.h"
#include "test_models.h"

namespace strata::rt {
namespace {

using Ints = std::vector<std::int32_t>;
using Counts = std::vector<std::int64_t>;

// Three tokens, four experts, top-2: token 0 prefers experts 1 then 2, token 1
// ties experts 2 and 3 (the lower first), token 2 prefers 0 then 3.
const std::vector<float> kLogits = {1, 3, 2, 0,  //
                                    0, 0, 5, 5,  //
                                    4, 1, 1, 2};

// Values uniform in [-range, range) (random.h's stream `seed`) in a new fp32 tensor.
Tensor random_tensor(Device& dev, std::int64_t n, std::uint64_t seed, float range) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = random_uniform(seed, i, -range, range);
  Tensor t = dev.allocate_tensor(n, DType::kFp32);
  upload_fp32(dev, v, t.view());
  return t;
}

// One forward: the scalar sum(out * r) and the experts its tokens went to.
struct Probe {
  double value = 0.0;
  std::vector<std::int32_t> experts;
};

// The gradient `grad` of f's value with respect to `input`, along a random
// direction (stream `seed`; only the elements `in_direction` accepts, when
// given), against central differences of step 1e-3: within tol * (|numeric| +
// 1), and not zero (a zero gradient checks nothing). No step may change the
// routing (`routed`), or the difference would measure a jump.
void check_directional(Device& dev, const std::string& what, Tensor& input, const std::vector<float>& grad,
                       const std::function<Probe()>& f, const std::vector<std::int32_t>& routed, std::uint64_t seed,
                       double tol, const std::function<bool(std::size_t)>& in_direction = {}) {
  const std::vector<float> base = download_fp32(dev, input.view());
  std::vector<float> dir(base.size(), 0.0f);
  double analytic = 0.0;
  for (std::size_t i = 0; i < dir.size(); ++i) {
    if (in_direction && !in_direction(i)) continue;
    dir[i] = random_uniform(seed, i, -1.0f, 1.0f);
    analytic += static_cast<double>(dir[i]) * grad[i];
  }
  const float step = 1e-3f;
  auto at = [&](float sign) {
    std::vector<float> moved = base;
    for (std::size_t i = 0; i < moved.size(); ++i) moved[i] += sign * step * dir[i];
    upload_fp32(dev, moved, input.view());
    const Probe p = f();
    EXPECT_EQ(p.experts, routed) << what << ": the step changed the routing";
    return p.value;
  };
  const double numeric = (at(1.0f) - at(-1.0f)) / (2.0 * step);
  upload_fp32(dev, base, input.view());
  EXPECT_NEAR(analytic, numeric, tol * (std::abs(numeric) + 1.0)) << what;
  EXPECT_GT(std::abs(analytic), 1e-3) << what << ": a zero gradient checks nothing";
}

TEST(MoeRouting, TopKGatesAndTheExpertByExpertOrder) {
  const Routing r = route_tokens(kLogits, 3, 4, 2, 0.0);
  EXPECT_EQ(r.expert, (Ints{1, 2, 2, 3, 0, 3}));
  const double e = std::exp(1.0);
  EXPECT_NEAR(r.gate[0], e / (e + 1), 1e-6);  // softmax over the two chosen logits 3 and 2
  EXPECT_NEAR(r.gate[1], 1 / (e + 1), 1e-6);
  EXPECT_NEAR(r.gate[2], 0.5, 1e-6);
  EXPECT_NEAR(r.gate[4], std::exp(2.0) / (std::exp(2.0) + 1), 1e-6);
  // Rows expert by expert, tokens in order: e0 {t2}, e1 {t0}, e2 {t0, t1}, e3 {t1, t2}.
  EXPECT_EQ(r.row_token, (Ints{2, 0, 0, 1, 1, 2}));
  EXPECT_EQ(r.slot, (Ints{1, 2, 3, 4, 0, 5}));
  EXPECT_EQ(r.per_expert, (Counts{1, 1, 2, 2}));
}

TEST(MoeRouting, ACapacityKeepsTheHighestGates) {
  // Capacity ceil(3 * 2 / 4 * 0.5) = 1: expert 2 keeps token 1 (gate 0.5 over
  // token 0's 0.27), expert 3 keeps token 1 (0.5 over token 2's 0.12).
  const Routing r = route_tokens(kLogits, 3, 4, 2, 0.5);
  EXPECT_EQ(r.per_expert, (Counts{1, 1, 1, 1}));
  EXPECT_EQ(r.chosen_per_expert, (Counts{1, 1, 2, 2}));
  EXPECT_EQ(r.row_token, (Ints{2, 0, 1, 1}));
  EXPECT_EQ(r.slot, (Ints{1, -1, 2, 3, 0, -1}));
}

TEST(MoeRouting, LoadBalancingLossIsItsCoefficientWhenBalancedAndEClosedOnOneExpert) {
  // Switch Transformer (Fedus et al. 2021, section 2.2): coeff * E * sum f_e P_e
  // is coeff at a uniform routing with uniform probabilities, and near coeff * E
  // when every token goes to one expert with probability near 1.
  const int E = 4;
  std::vector<float> balanced(E * E, 0.0f), collapsed(E * E, 0.0f);
  for (int t = 0; t < E; ++t) {
    balanced[t * E + t] = 1e-4f;  // routes token t to expert t, probabilities ~1/E
    collapsed[t * E] = 30.0f;
  }
  EXPECT_NEAR(load_balancing_loss(route_tokens(balanced, E, E, 1, 0.0), balanced, 0.01), 0.01, 1e-6);
  EXPECT_NEAR(load_balancing_loss(route_tokens(collapsed, E, E, 1, 0.0), collapsed, 0.01), 0.01 * E, 1e-6);
}

TEST(MoeRouting, RouterGradientMatchesFiniteDifferences) {
  // L = sum c * gate + s * aux, routing held (no logit is near a tie).
  const std::int64_t T = 5;
  const int E = 6, k = 2;
  std::vector<float> logits(T * E), c(T * k);
  for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = random_uniform(11, i, -2.0f, 2.0f);
  for (std::size_t i = 0; i < c.size(); ++i) c[i] = random_uniform(12, i, -1.0f, 1.0f);
  const double coeff = 0.3, scale = 0.7;
  auto loss = [&](const std::vector<float>& x) {
    const Routing r = route_tokens(x, T, E, k, 0.0);
    double l = scale * load_balancing_loss(r, x, coeff);
    for (std::size_t i = 0; i < c.size(); ++i) l += c[i] * r.gate[i];
    return l;
  };
  const Routing r = route_tokens(logits, T, E, k, 0.0);
  const std::vector<float> grad = router_logit_grads(r, logits, c, coeff, scale);
  const double h = 1e-3;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    std::vector<float> up = logits, down = logits;
    up[i] += static_cast<float>(h);
    down[i] -= static_cast<float>(h);
    ASSERT_EQ(route_tokens(up, T, E, k, 0.0).expert, r.expert) << "logit " << i << " flips the routing";
    EXPECT_NEAR(grad[i], (loss(up) - loss(down)) / (2 * h), 2e-4) << "logit " << i;
  }
}

// The MoE MLP of layer 0 of the small Llama-shaped MoE model on one rank (ep 1).
class MoeMlpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::llama_moe_small();
    model_.moe.moe_aux_loss_coeff = 0.0;  // the router's part is checked above; here the layer's
    plan_.dp = 1;
    plan_.micro_batch_size = 2;
    plan_.global_batch_size = 2;
    plan_.moe.active = true;
    plan_.moe.etp = 1;
    plan_.moe.token_dispatcher = MoeDispatcher::kAllToAll;
    DeviceOptions options;
    options.cpu_threads = 1;
    device_ = make_device(Backend::kCpu, 0, options);
    self_ = make_self_communicator(*device_, {});
    recorder_ = std::make_unique<Recorder>(*device_);
    shapes_ = make_shapes(model_, plan_, 0, DType::kFp32);
    kernels_ = std::make_unique<Kernels>(*device_, *self_, *recorder_, shapes_);
    layout_ = make_param_layout(model_, plan_, 0, 0, 0);
    experts_ = &layout_.units[layout_.expert_units[0][0]];
  }

  Tensor random_tensor(std::int64_t n, std::uint64_t seed, float range) {
    return rt::random_tensor(*device_, n, seed, range);
  }

  ModelSpec model_;
  PlanSpec plan_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<Communicator> self_;
  std::unique_ptr<Recorder> recorder_;
  Shapes shapes_;
  std::unique_ptr<Kernels> kernels_;
  ParamLayout layout_;
  const Unit* experts_ = nullptr;
};

class MoeMlpDispatchers : public MoeMlpTest, public ::testing::WithParamInterface<MoeDispatcher> {};

TEST_P(MoeMlpDispatchers, BackwardMatchesFiniteDifferencesOfTheForward) {
  const std::int64_t tokens = shapes_.local_tokens, h = shapes_.h, E = model_.moe.num_experts;
  plan_.moe.token_dispatcher = GetParam();
  MoeMlp moe(*kernels_, *self_, model_, plan_, 1.0);
  Tensor x = random_tensor(tokens * h, 21, 1.0f);
  Tensor router = random_tensor(E * h, 22, 0.5f);
  Tensor w = random_tensor(experts_->numel, 23, 0.3f);
  const std::vector<float> r = download_fp32(*device_, random_tensor(tokens * h, 24, 1.0f).view());
  // f = sum(out * r); its gradient is the backward of dy = r.
  auto f = [&]() {
    MoeActivations a;
    const std::vector<float> out = download_fp32(*device_, moe.forward(router.view(), *experts_, w.view(), x.view(), a).view());
    Probe p;
    for (std::size_t i = 0; i < out.size(); ++i) p.value += static_cast<double>(out[i]) * r[i];
    p.experts = a.routing.expert;
    return p;
  };
  MoeActivations a;
  moe.forward(router.view(), *experts_, w.view(), x.view(), a);
  const std::vector<std::int32_t> routed = a.routing.expert;
  Tensor dy = device_->allocate_tensor(tokens * h, DType::kFp32);
  upload_fp32(*device_, r, dy.view());
  Tensor router_grad = device_->allocate_tensor(E * h, DType::kFp32);
  Tensor w_grad = device_->allocate_tensor(experts_->numel, DType::kFp32);
  device_->fill(router_grad.view(), 0.0f);
  device_->fill(w_grad.view(), 0.0f);
  const std::vector<float> dx = download_fp32(
      *device_, moe.backward(router.view(), router_grad.view(), *experts_, w.view(), w_grad.view(), x.view(), dy.view(), a)
                    .view());
  check_directional(*device_, "x", x, dx, f, routed, 31, 2e-3);
  check_directional(*device_, "router", router, download_fp32(*device_, router_grad.view()), f, routed, 31, 2e-3);
  check_directional(*device_, "experts", w, download_fp32(*device_, w_grad.view()), f, routed, 31, 2e-3);
}

INSTANTIATE_TEST_SUITE_P(Dispatchers, MoeMlpDispatchers,
                         ::testing::Values(MoeDispatcher::kAllToAll, MoeDispatcher::kAllGather),
                         [](const ::testing::TestParamInfo<MoeDispatcher>& p) {
                           return std::string(p.param == MoeDispatcher::kAllToAll ? "alltoall" : "allgather");
                         });

// A whole MoE transformer layer (GPT-shaped: biases, GeLU, a shared expert beside
// the routed ones) on one rank: the backward's gradients of the input, of every
// dense parameter (attention, norms, router, shared expert) and of the experts
// against central differences of the forward.
TEST(MoeTransformerLayer, BackwardMatchesFiniteDifferencesWithASharedExpert) {
  ModelSpec model = testing::gpt_moe_small();
  model.moe.moe_aux_loss_coeff = 0.0;
  ASSERT_GT(model.moe.moe_shared_expert_intermediate_size, 0);
  PlanSpec plan;
  plan.dp = 1;
  plan.micro_batch_size = 1;
  plan.global_batch_size = 1;
  plan.moe.active = true;
  plan.moe.etp = 1;
  plan.moe.token_dispatcher = MoeDispatcher::kAllToAll;
  DeviceOptions options;
  options.cpu_threads = 1;
  auto device = make_device(Backend::kCpu, 0, options);
  auto self = make_self_communicator(*device, {});
  Recorder recorder(*device);
  const Shapes shapes = make_shapes(model, plan, 0, DType::kFp32);
  Kernels kernels(*device, *self, recorder, shapes);
  MoeMlp moe(kernels, *self, model, plan, 1.0);
  TransformerLayer layer(kernels, Recompute::kNone, nullptr, &moe);
  const ParamLayout layout = make_param_layout(model, plan, 0, 0, 0);
  const Unit& dense = layout.units[layout.layer_units[0][0]];
  const Unit& experts = layout.units[layout.expert_units[0][0]];
  const std::int64_t n = shapes.local_tokens * shapes.h;
  auto random = [&](std::int64_t count, std::uint64_t seed, float range) {
    return random_tensor(*device, count, seed, range);
  };
  Tensor x = random(n, 41, 1.0f), w = random(dense.numel, 42, 0.2f), we = random(experts.numel, 43, 0.2f);
  const std::vector<float> r = download_fp32(*device, random(n, 44, 1.0f).view());
  auto f = [&]() {
    LayerActivations a;
    a.x = device->allocate_tensor(n, DType::kFp32);
    device->copy_on_device(x.view().data, a.x.view().data, static_cast<std::size_t>(x.view().bytes()));
    const std::vector<float> out =
        download_fp32(*device, layer.forward(layer_params(dense, w.view(), &experts, we.view()), a).view());
    Probe p;
    for (std::size_t i = 0; i < out.size(); ++i) p.value += static_cast<double>(out[i]) * r[i];
    p.experts = a.moe.routing.expert;
    return p;
  };
  Tensor g = device->allocate_tensor(dense.numel, DType::kFp32), ge = device->allocate_tensor(experts.numel, DType::kFp32);
  device->fill(g.view(), 0.0f);
  device->fill(ge.view(), 0.0f);
  LayerActivations a;
  a.x = device->allocate_tensor(n, DType::kFp32);
  device->copy_on_device(x.view().data, a.x.view().data, static_cast<std::size_t>(x.view().bytes()));
  layer.forward(layer_params(dense, w.view(), &experts, we.view()), a);
  const std::vector<std::int32_t> routed = a.moe.routing.expert;
  Tensor dy = device->allocate_tensor(n, DType::kFp32);
  upload_fp32(*device, r, dy.view());
  const std::vector<float> dx = download_fp32(
      *device, layer.backward(layer_params(dense, w.view(), &experts, we.view()),
                              layer_params(dense, g.view(), &experts, ge.view()), a, std::move(dy))
                   .view());
  check_directional(*device, "x", x, dx, f, routed, 51, 3e-3);
  const std::vector<float> dense_grad = download_fp32(*device, g.view());
  check_directional(*device, "dense parameters", w, dense_grad, f, routed, 51, 3e-3);
  check_directional(*device, "experts", we, download_fp32(*device, ge.view()), f, routed, 51, 3e-3);
  // The shared expert's own fc1 alone, so an error there is not lost among the others.
  const ParamSpec* shared_fc1 = nullptr;
  for (const ParamSpec& p : dense.params) {
    if (p.name.find("shared_fc1.weight") != std::string::npos) shared_fc1 = &p;
  }
  ASSERT_NE(shared_fc1, nullptr);
  check_directional(*device, "dense parameters (shared_fc1 only)", w, dense_grad, f, routed, 51, 3e-3,
                    [&](std::size_t i) {
                      const auto at = static_cast<std::int64_t>(i);
                      return at >= shared_fc1->offset && at < shared_fc1->offset + shared_fc1->numel();
                    });
}

}  // namespace
}  // namespace strata::rt
