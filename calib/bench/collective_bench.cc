#include "calib/bench/collective_bench.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "runtime/device/random.h"
#include "runtime/device/tensor_io.h"

namespace strata::calib {
namespace {

const CollectiveOp kOps[] = {CollectiveOp::kAllReduce,     CollectiveOp::kAllGather,
                             CollectiveOp::kReduceScatter, CollectiveOp::kBroadcast,
                             CollectiveOp::kAllToAll,      CollectiveOp::kSendRecv};

constexpr float kLo = -1.0f, kHi = 1.0f;
// Sizes every curve gets regardless of the time bound (1 KiB .. 8 KiB), so a
// slow or busy host still yields a curve to interpolate.
constexpr std::size_t kMinSizes = 4;
std::uint64_t seed_of(int rank) { return 7000 + static_cast<std::uint64_t>(rank); }

// The value rank r put at element i of its send buffer.
float sent(int r, std::int64_t i) { return rt::random_uniform(seed_of(r), static_cast<std::uint64_t>(i), kLo, kHi); }

struct Buffers {
  rt::Tensor send, recv;
  std::int64_t per_rank = 0;  // elements per rank block (all_gather, reduce_scatter, all_to_all)
  double bytes = 0.0;         // nccl-tests' size of the operation
};

// Element counts follow nccl-tests: all_gather's size is the gathered output,
// reduce_scatter's the input, all_to_all's each rank's send buffer.
Buffers make_buffers(rt::Communicator& c, CollectiveOp op, double target_bytes) {
  rt::Device& dev = c.device();
  const int g = c.size();
  const DType t = DType::kFp32;
  const std::int64_t total = std::max<std::int64_t>(
      g, static_cast<std::int64_t>(std::llround(target_bytes / 4.0 / g)) * g);
  Buffers b;
  b.per_rank = total / g;
  switch (op) {
    case CollectiveOp::kAllReduce:
    case CollectiveOp::kBroadcast:
    case CollectiveOp::kSendRecv:
      b.send = dev.allocate_tensor(total, t);
      b.recv = dev.allocate_tensor(total, t);
      break;
    case CollectiveOp::kAllGather:
      b.send = dev.allocate_tensor(b.per_rank, t);
      b.recv = dev.allocate_tensor(total, t);
      break;
    case CollectiveOp::kReduceScatter:
      b.send = dev.allocate_tensor(total, t);
      b.recv = dev.allocate_tensor(b.per_rank, t);
      break;
    case CollectiveOp::kAllToAll:
      b.send = dev.allocate_tensor(total, t);
      b.recv = dev.allocate_tensor(total, t);
      break;
  }
  b.bytes = static_cast<double>(total) * 4.0;
  dev.fill_random(b.send.view(), seed_of(c.rank()), 0, kLo, kHi);
  dev.fill(b.recv.view(), 0.5f);
  return b;
}

void run(rt::Communicator& c, CollectiveOp op, Buffers& b) {
  const int g = c.size(), r = c.rank();
  switch (op) {
    case CollectiveOp::kAllReduce: c.all_reduce(b.send.view(), b.recv.view()); break;
    case CollectiveOp::kAllGather: c.all_gather(b.send.view(), b.recv.view()); break;
    case CollectiveOp::kReduceScatter: c.reduce_scatter(b.send.view(), b.recv.view()); break;
    case CollectiveOp::kBroadcast: c.broadcast(r == 0 ? b.send.view() : b.recv.view(), 0); break;
    case CollectiveOp::kAllToAll: c.all_to_all(b.send.view(), b.recv.view()); break;
    case CollectiveOp::kSendRecv: {
      // Every rank sends to the next and receives from the previous (nccl-tests' sendrecv).
      auto s = c.start_send(b.send.view(), (r + 1) % g, 0);
      auto v = c.start_recv(b.recv.view(), (r + g - 1) % g, 0);
      s->wait();
      v->wait();
      break;
    }
  }
}

void check(rt::Communicator& c, CollectiveOp op, const Buffers& b) {
  const int g = c.size(), r = c.rank();
  rt::Device& dev = c.device();
  const rt::TensorView out = op == CollectiveOp::kBroadcast && r == 0 ? b.send.view() : b.recv.view();
  const std::int64_t n = out.numel;
  for (int s = 0; s < 8; ++s) {
    const std::int64_t i = (n - 1) * s / 7;
    double want = 0.0;
    switch (op) {
      case CollectiveOp::kAllReduce:
        for (int q = 0; q < g; ++q) want += sent(q, i);
        break;
      case CollectiveOp::kAllGather: want = sent(static_cast<int>(i / b.per_rank), i % b.per_rank); break;
      case CollectiveOp::kReduceScatter:
        for (int q = 0; q < g; ++q) want += sent(q, r * b.per_rank + i);
        break;
      case CollectiveOp::kBroadcast: want = sent(0, i); break;
      case CollectiveOp::kAllToAll:
        want = sent(static_cast<int>(i / b.per_rank), r * b.per_rank + i % b.per_rank);
        break;
      case CollectiveOp::kSendRecv: want = sent((r + g - 1) % g, i); break;
    }
    const float got = rt::download_fp32(dev, out.slice(i, 1))[0];
    // fp32 sums over g ranks in the library's order.
    if (!(std::abs(got - want) <= 1e-6 * g * (1.0 + std::abs(want)))) {
      throw InternalError(fmt::format("{} over {} ranks ({} bytes): element {} on rank {} is {}, expected {}",
                                      to_string(op), g, b.bytes, i, r, got, want));
    }
  }
}

// Per-rank times -> the slowest rank's, identical on every member.
std::vector<double> max_over_ranks(rt::Communicator& c, const std::vector<double>& times) {
  rt::Device& dev = c.device();
  rt::Tensor t = dev.allocate_tensor(static_cast<std::int64_t>(times.size()), DType::kFp32);
  rt::upload_fp32(dev, std::vector<float>(times.begin(), times.end()), t.view());
  c.all_reduce(t.view(), t.view(), rt::ReduceOp::kMax);
  std::vector<float> out = rt::download_fp32(dev, t.view());
  return std::vector<double>(out.begin(), out.end());
}

SizePoint measure(rt::Communicator& c, CollectiveOp op, double target_bytes,
                  const TimingOptions& timing) {
  rt::Device& dev = c.device();
  Buffers b = make_buffers(c, op, target_bytes);
  for (int i = 0; i < timing.warmup; ++i) run(c, op, b);
  auto start = dev.create_event();
  auto end = dev.create_event();
  auto timed = [&](int calls) {
    c.barrier();
    dev.record(*start);
    for (int i = 0; i < calls; ++i) run(c, op, b);
    dev.record(*end);
    return dev.elapsed(*start, *end).seconds() / calls;
  };
  const double probe = max_over_ranks(c, {timed(1)})[0];
  const int calls = calls_for(probe, timing);
  std::vector<double> samples;
  for (int r = 0; r < timing.repeats; ++r) samples.push_back(timed(calls));
  const Timing t = summarize_samples(max_over_ranks(c, samples), calls);
  dev.synchronize();
  check(c, op, b);
  return {b.bytes, t.median_s, t.spread};
}

}  // namespace

bool is_cliff(const SizePoint& lo, const SizePoint& hi) {
  return hi.seconds > kCliffFactor * lo.seconds * (hi.bytes / lo.bytes);
}

void refine_cliffs(const std::function<SizePoint(double)>& measure, std::vector<SizePoint>& points) {
  const std::vector<SizePoint> coarse = points;
  for (std::size_t i = 0; i + 1 < coarse.size(); ++i) {
    if (!is_cliff(coarse[i], coarse[i + 1])) continue;
    SizePoint lo = coarse[i], hi = coarse[i + 1];
    for (int b = 0; b < kCliffBisections; ++b) {
      SizePoint mid = measure(std::sqrt(lo.bytes * hi.bytes));
      if (mid.bytes <= lo.bytes || mid.bytes >= hi.bytes) break;  // rounding to the group size
      points.push_back(mid);
      // Follow the half with the larger jump in cost per byte.
      const double left = (mid.seconds / mid.bytes) / (lo.seconds / lo.bytes);
      const double right = (hi.seconds / hi.bytes) / (mid.seconds / mid.bytes);
      if (left > right) hi = mid; else lo = mid;
    }
  }
  std::sort(points.begin(), points.end(), [](const SizePoint& a, const SizePoint& b) { return a.bytes < b.bytes; });
}

std::vector<int> collective_group_sizes(int world_size) {
  std::vector<int> out;
  for (int g = 2; g <= world_size; g *= 2) out.push_back(g);
  if (world_size >= 2 && out.back() != world_size) out.push_back(world_size);
  return out;
}

std::size_t collective_curve_count(int world_size) {
  return collective_group_sizes(world_size).size() * std::size(kOps);
}

std::vector<CollectiveMeasurement> bench_collectives(
    rt::Communicator& world, const CollectiveBenchOptions& options,
    const std::function<void(std::size_t)>& progress) {
  std::vector<CollectiveMeasurement> out;
  std::size_t done = 0;
  for (int g : collective_group_sizes(world.size())) {
    std::unique_ptr<rt::Communicator> group = world.split(world.rank() < g ? 0 : -1, world.rank());
    if (group) {
      for (CollectiveOp op : kOps) {
        CollectiveMeasurement m;
        m.op = op;
        m.group_size = g;
        m.inter_node = g > options.ranks_per_node;
        for (double bytes = options.min_bytes; bytes <= options.max_bytes * 1.0001; bytes *= 2) {
          SizePoint p = measure(*group, op, bytes, options.timing);
          spdlog::debug("rank {}: {} over {} ranks, {:.0f} B: {:.2f} us", world.rank(), to_string(op), g,
                        p.bytes, p.seconds * 1e6);
          if (!m.points.empty() && p.bytes <= m.points.back().bytes) continue;  // rounding to g
          m.points.push_back(p);
          // Past a few sizes, stop once one operation takes longer than the bound.
          if (p.seconds > options.max_op_s && m.points.size() >= kMinSizes) break;
        }
        refine_cliffs([&](double bytes) { return measure(*group, op, bytes, options.timing); }, m.points);
        out.push_back(std::move(m));
        if (progress) progress(++done);
      }
    } else {
      done += std::size(kOps);
    }
    world.barrier();
    if (progress) progress(done);
  }
  return out;
}

}  // namespace strata::calib
