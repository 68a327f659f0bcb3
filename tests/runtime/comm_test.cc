// Communicator operations on whatever world this process is started in: alone
// (the one-rank "self" communicator) or under `mpirun -n 2` / `-n 4
// --oversubscribe` (MPI). Every rank fills its inputs from the counter-based
// generator, so each rank can compute the single-rank answer for all ranks on the
// host and compare.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include <gtest/gtest.h>

#include "core/error.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/gather_bytes.h"
#include "runtime/launch/mpi_env.h"
#include "runtime/comm/process_groups.h"
#include "runtime/device/random.h"
#include "runtime/device/tensor_io.h"

namespace strata::rt {
namespace {

// Values rank r contributes: element i of its input is value(seed, r * n + i).
float value(std::uint64_t seed, std::int64_t index) {
  return random_uniform(seed, static_cast<std::uint64_t>(index), -1.0f, 1.0f);
}

class CommTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DeviceOptions options;
    options.cpu_threads = 1;  // ranks share the cores
    device_ = make_device(Backend::kCpu, 0, options);
    CommOptions comm_options;
    comm_options.timeout = std::chrono::seconds(60);
    world_ = make_world_communicator(*device_, comm_options);
    rank_ = world_->rank();
    size_ = world_->size();
  }

  Tensor filled(std::int64_t n, std::uint64_t seed, std::int64_t first) {
    Tensor t = device_->allocate_tensor(n, DType::kFp32);
    device_->fill_random(t.view(), seed, static_cast<std::uint64_t>(first), -1.0f, 1.0f);
    return t;
  }
  std::vector<float> get(const Tensor& t) { return download_fp32(*device_, t.view()); }

  std::unique_ptr<Device> device_;
  std::unique_ptr<Communicator> world_;
  int rank_ = 0;
  int size_ = 1;
};

// fp32 sums of `size` terms in the library's order against a double sum.
void expect_near_all(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-5) << "element " << i;
  }
}

TEST_F(CommTest, WorldMatchesTheLaunch) {
  const LaunchInfo launch = detect_launch();
  EXPECT_EQ(world_->size(), launch.size);
  EXPECT_EQ(world_->rank(), launch.rank);
  EXPECT_STREQ(world_->transport(), launch.launched() ? "mpi" : "self");
  // With the default thread count, the ranks on this node never ask for more
  // threads in all than the node has cores.
  auto dev = make_device(Backend::kCpu, 0);
  EXPECT_LE(dev->info().compute_units * launch.local_size,
            std::max(dev->info().host_cores, launch.local_size));
}

TEST_F(CommTest, SelfHasNoPeers) {
  if (size_ > 1) GTEST_SKIP() << "only a one-rank world has no peers";
  Tensor buf = device_->allocate_tensor(4, DType::kFp32);
  EXPECT_THROW(world_->send(buf.view(), 1), InternalError);
  EXPECT_THROW(world_->recv(buf.view(), 0), InternalError);
}

TEST_F(CommTest, AllReduceSumAndMaxInAndOutOfPlace) {
  const std::int64_t n = 10007;
  Tensor in = filled(n, 100, rank_ * n);
  Tensor out = device_->allocate_tensor(n, DType::kFp32);
  world_->all_reduce(in.view(), out.view(), ReduceOp::kSum);
  std::vector<double> sum(n, 0.0), mx(n, -2.0);
  for (int r = 0; r < size_; ++r) {
    for (std::int64_t i = 0; i < n; ++i) {
      sum[i] += value(100, r * n + i);
      mx[i] = std::max<double>(mx[i], value(100, r * n + i));
    }
  }
  expect_near_all(get(out), sum);
  world_->all_reduce(in.view(), in.view(), ReduceOp::kMax);  // in place
  expect_near_all(get(in), mx);
}

TEST_F(CommTest, AllGatherInAndOutOfPlace) {
  const std::int64_t n = 1001;
  Tensor in = filled(n, 101, rank_ * n);
  Tensor out = device_->allocate_tensor(n * size_, DType::kFp32);
  world_->all_gather(in.view(), out.view());
  std::vector<double> want;
  for (std::int64_t i = 0; i < n * size_; ++i) want.push_back(value(101, i));
  expect_near_all(get(out), want);
  // In place: this rank's block of the output already holds its input.
  Tensor buf = filled(n * size_, 999, 0);
  device_->copy_on_device(in.view().data, buf.view().slice(rank_ * n, n).data, n * sizeof(float));
  world_->all_gather(buf.view().slice(rank_ * n, n), buf.view());
  expect_near_all(get(buf), want);
}

// Rank r sends r * 37 + (r odd) bytes (rank 0: none) of every value 0..255 in a
// rank-dependent order, so odd lengths, the padding and all bit patterns travel.
std::string bytes_of_rank(int r) {
  std::string s(static_cast<std::size_t>(r * 37 + r % 2), '\0');
  for (std::size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>((i * 7 + static_cast<std::size_t>(r)) % 256);
  return s;
}

TEST_F(CommTest, AllGatherBytesGivesEveryRankEachRanksBytesExactly) {
  const std::vector<std::string> got = all_gather_bytes(*world_, bytes_of_rank(rank_));
  ASSERT_EQ(static_cast<int>(got.size()), size_);
  for (int r = 0; r < size_; ++r) EXPECT_EQ(got[r], bytes_of_rank(r)) << "rank " << r;
  // Every byte value once, 256 of them (an even length), from each rank.
  std::string all_values(256, '\0');
  for (int v = 0; v < 256; ++v) all_values[static_cast<std::size_t>(v)] = static_cast<char>(v);
  const std::vector<std::string> again = all_gather_bytes(*world_, all_values);
  for (int r = 0; r < size_; ++r) EXPECT_EQ(again[r], all_values) << "rank " << r;
}

TEST_F(CommTest, ReduceScatterInAndOutOfPlace) {
  const std::int64_t n = 513;
  Tensor in = filled(n * size_, 102, rank_ * n * size_);
  std::vector<double> want(n, 0.0);
  for (int r = 0; r < size_; ++r) {
    for (std::int64_t i = 0; i < n; ++i) want[i] += value(102, r * n * size_ + rank_ * n + i);
  }
  Tensor out = device_->allocate_tensor(n, DType::kFp32);
  world_->reduce_scatter(in.view(), out.view());
  expect_near_all(get(out), want);
  // In place: the result lands in this rank's block of the input (ZeRO's gradient shard).
  const TensorView mine = in.view().slice(rank_ * n, n);
  world_->reduce_scatter(in.view(), mine);
  expect_near_all(download_fp32(*device_, mine), want);
}

TEST_F(CommTest, BroadcastFromTheLastRank) {
  const std::int64_t n = 777;
  const int root = size_ - 1;
  Tensor buf = filled(n, 103, rank_ * n);
  world_->broadcast(buf.view(), root);
  std::vector<double> want;
  for (std::int64_t i = 0; i < n; ++i) want.push_back(value(103, root * n + i));
  expect_near_all(get(buf), want);
}

TEST_F(CommTest, AllToAllTransposesBlocks) {
  const std::int64_t n = 65;
  Tensor in = filled(n * size_, 104, rank_ * n * size_);
  Tensor out = device_->allocate_tensor(n * size_, DType::kFp32);
  world_->all_to_all(in.view(), out.view());
  std::vector<double> want;  // block i comes from rank i's block rank_
  for (int i = 0; i < size_; ++i) {
    for (std::int64_t j = 0; j < n; ++j) want.push_back(value(104, i * n * size_ + rank_ * n + j));
  }
  expect_near_all(get(out), want);
}

// Uneven blocks, as an MoE layer's token dispatch sends them: rank r sends
// (r + 2j + 1) x 3 elements to rank j (rank 0 sends nothing to the last rank when
// there are several, an empty block); block i of recv holds rank i's block for
// this rank, back to back.
TEST_F(CommTest, AllToAllVSendsUnevenBlocks) {
  auto count = [&](int from, int to) -> std::int64_t {
    if (size_ > 1 && from == 0 && to == size_ - 1) return 0;
    return (from + 2 * to + 1) * 3;
  };
  std::vector<std::int64_t> send_counts, recv_counts;
  std::int64_t send_total = 0, recv_total = 0;
  for (int j = 0; j < size_; ++j) {
    send_counts.push_back(count(rank_, j));
    recv_counts.push_back(count(j, rank_));
    send_total += send_counts.back();
    recv_total += recv_counts.back();
  }
  // Rank r's send buffer holds values from its own stretch of the counter (1000 per rank).
  Tensor in = filled(send_total, 106, rank_ * 1000);
  Tensor out = device_->allocate_tensor(recv_total + 5, DType::kFp32);  // room to spare
  world_->all_to_all_v(in.view(), send_counts, out.view(), recv_counts);
  std::vector<double> want;
  for (int i = 0; i < size_; ++i) {
    std::int64_t offset = 0;  // where rank i's block for this rank starts in its send buffer
    for (int j = 0; j < rank_; ++j) offset += count(i, j);
    for (std::int64_t k = 0; k < count(i, rank_); ++k) want.push_back(value(106, i * 1000 + offset + k));
  }
  std::vector<float> got = get(out);
  got.resize(static_cast<std::size_t>(recv_total));
  expect_near_all(got, want);
  // Counts that do not fit the buffer are the caller's mistake, named before anything starts.
  std::vector<std::int64_t> too_many = send_counts;
  too_many[0] += send_total + 1;
  EXPECT_THROW(world_->start_all_to_all_v(in.view(), too_many, out.view(), recv_counts), InternalError);
}

TEST_F(CommTest, SendRecvAroundARing) {
  if (size_ < 2) GTEST_SKIP() << "point-to-point needs two ranks (run under mpirun -n 2)";
  const std::int64_t n = 4099;
  const int next = (rank_ + 1) % size_, prev = (rank_ + size_ - 1) % size_;
  Tensor out = filled(n, 105, rank_ * n);
  Tensor in = device_->allocate_tensor(n, DType::kFp32);
  // Non-blocking both ways, as a pipeline stage posts its send and receive.
  auto recv = world_->start_recv(in.view(), prev, 7);
  auto send = world_->start_send(out.view(), next, 7);
  recv->wait();
  send->wait();
  std::vector<double> want;
  for (std::int64_t i = 0; i < n; ++i) want.push_back(value(105, prev * n + i));
  expect_near_all(get(in), want);
  // Blocking form: even ranks send first, odd ranks receive first.
  if (rank_ % 2 == 0) {
    world_->send(out.view(), next, 8);
    world_->recv(in.view(), prev, 8);
  } else {
    world_->recv(in.view(), prev, 8);
    world_->send(out.view(), next, 8);
  }
  expect_near_all(get(in), want);
}

// A ring step as one operation (the context-parallel ring's): every rank sends
// first and receives at once, cp - 1 times, so each block visits every rank.
TEST_F(CommTest, SendRecvStepsPassEveryBlockRoundTheRing) {
  if (size_ < 2) GTEST_SKIP() << "point-to-point needs two ranks (run under mpirun -n 2)";
  const std::int64_t n = 1031;
  const int next = (rank_ + 1) % size_, prev = (rank_ + size_ - 1) % size_;
  Tensor current = filled(n, 106, rank_ * n);
  for (int step = 1; step < size_; ++step) {
    Tensor incoming = device_->allocate_tensor(n, DType::kFp32);
    world_->start_send_recv(current.view(), next, incoming.view(), prev, step)->wait();
    const int origin = (rank_ + size_ - step) % size_;
    std::vector<double> want;
    for (std::int64_t i = 0; i < n; ++i) want.push_back(value(106, origin * n + i));
    expect_near_all(get(incoming), want);
    current = std::move(incoming);
  }
}

TEST_F(CommTest, SplitIntoEvenAndOddRanks) {
  auto half = world_->split(rank_ % 2, rank_);
  ASSERT_NE(half, nullptr);
  EXPECT_EQ(half->size(), (size_ + 1 - rank_ % 2) / 2);
  EXPECT_EQ(half->rank(), rank_ / 2);
  Tensor x = device_->allocate_tensor(1, DType::kFp32);
  device_->fill(x.view(), static_cast<float>(rank_));
  half->all_reduce(x.view(), x.view());
  double want = 0.0;
  for (int r = rank_ % 2; r < size_; r += 2) want += r;
  EXPECT_EQ(get(x)[0], want);
  EXPECT_EQ(world_->split(-1, 0), nullptr);  // no colour: no group
  world_->barrier();
}

TEST_F(CommTest, ProcessGroupsReduceOverTheirMembers) {
  // Every factorisation of the world into tp x dp x pp.
  for (int tp = 1; tp <= size_; ++tp) {
    for (int dp = 1; dp <= size_ / tp; ++dp) {
      if (size_ % (tp * dp) != 0) continue;
      const RankLayout sizes(RankLayout::Sizes{.tp = tp, .dp = dp, .pp = size_ / (tp * dp)});
      SCOPED_TRACE(::testing::Message() << "tp " << tp << " dp " << dp << " pp " << size_ / (tp * dp));
      ProcessGroups g = make_process_groups(*world_, sizes);
      EXPECT_EQ(g.coord, sizes.coord(rank_));
      EXPECT_EQ(g.tp->rank(), g.coord.tp);
      EXPECT_EQ(g.dp->rank(), g.coord.dp);
      EXPECT_EQ(g.pp->rank(), g.coord.pp);
      const std::pair<Communicator*, GroupKind> kinds[] = {
          {g.tp.get(), GroupKind::kTensor}, {g.dp.get(), GroupKind::kData},
          {g.pp.get(), GroupKind::kPipeline}, {g.model.get(), GroupKind::kModel},
          {g.embedding.get(), GroupKind::kEmbedding}};
      for (auto [comm, kind] : kinds) {
        const auto members = sizes.group(kind, rank_);
        if (members.empty()) {
          EXPECT_EQ(comm, nullptr) << to_string(kind);
          continue;
        }
        ASSERT_NE(comm, nullptr) << to_string(kind);
        EXPECT_EQ(comm->size(), static_cast<int>(members.size())) << to_string(kind);
        // Sum of (rank + 1) over the group: who is in it, exactly.
        Tensor x = device_->allocate_tensor(1, DType::kFp32);
        device_->fill(x.view(), static_cast<float>(rank_ + 1));
        comm->all_reduce(x.view(), x.view());
        double want = 0.0;
        for (int m : members) want += m + 1;
        EXPECT_EQ(get(x)[0], want) << to_string(kind);
      }
    }
  }
}

TEST_F(CommTest, MismatchedWorldSizeIsAnInputError) {
  const RankLayout sizes(RankLayout::Sizes{.tp = size_ + 1});
  try {
    make_process_groups(*world_, sizes);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(e.message().find(std::to_string(size_ + 1) + " ranks"), std::string::npos)
        << e.message();
  }
}

TEST_F(CommTest, AMissingPeerTimesOutInsteadOfHanging) {
  if (size_ < 2) GTEST_SKIP() << "needs a peer (run under mpirun -n 2)";
  Tensor buf = device_->allocate_tensor(16, DType::kFp32);
  device_->fill(buf.view(), 1.0f);
  world_->barrier();
  if (rank_ == 0) {
    world_->set_timeout(std::chrono::milliseconds(300));
    auto recv = world_->start_recv(buf.view(), 1, 3);
    const auto start = std::chrono::steady_clock::now();
    try {
      recv->wait();
      ADD_FAILURE() << "the receive completed although rank 1 had not sent";
    } catch (const CommError& e) {
      const double waited =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      EXPECT_GE(waited, 0.3);
      EXPECT_LT(waited, 1.5);  // rank 1 sends after 2 s: the timeout fired first
      EXPECT_NE(std::string(e.what()).find("did not complete within"), std::string::npos);
      EXPECT_NE(std::string(e.what()).find("recv from rank 1"), std::string::npos);
    }
    // The peer was late, not dead: with a longer timeout the same receive completes.
    world_->set_timeout(std::chrono::seconds(60));
    recv->wait();
  } else if (rank_ == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    world_->send(buf.view(), 0, 3);
  }
  world_->barrier();
}

}  // namespace
}  // namespace strata::rt

namespace {

// On ranks other than 0: report only failures, each tagged with the rank, so
// the output stays one readable report.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (result.failed()) {
      std::fprintf(stderr, "[rank %d] %s:%d: %s\n", rank_,
                   result.file_name() ? result.file_name() : "?", result.line_number(),
                   result.summary());
    }
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  strata::rt::MpiSession session;
  const int rank = session.launch().rank;
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  return RUN_ALL_TESTS();
}
