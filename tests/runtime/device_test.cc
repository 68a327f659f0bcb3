// The backend factory and what a device says about itself.
#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"
#include "runtime/device/backend.h"
#include "runtime/comm/communicator.h"
#include "runtime/cpu/host_block_cache.h"
#include "runtime/device/device.h"

namespace strata::rt {
namespace {

TEST(Device, BackendNames) {
  EXPECT_EQ(parse_backend("cpu"), Backend::kCpu);
  EXPECT_EQ(parse_backend("cuda"), Backend::kCuda);
  EXPECT_EQ(parse_backend("gpu"), std::nullopt);
  EXPECT_STREQ(to_string(Backend::kCuda), "cuda");
  EXPECT_TRUE(backend_compiled(Backend::kCpu));
}

TEST(Device, CpuSaysItComputesEveryDtypeInFp32) {
  DeviceOptions options;
  options.cpu_threads = 1;
  auto dev = make_device(Backend::kCpu, 0, options);
  const DeviceInfo& info = dev->info();
  EXPECT_EQ(info.backend, Backend::kCpu);
  EXPECT_EQ(info.compute_units, 1);
  EXPECT_GE(info.host_cores, 1);
  EXPECT_GT(info.memory_bytes, 0);
  EXPECT_FALSE(info.isa.empty());  // Eigen's SIMD sets, e.g. "AVX512, FMA, AVX2, AVX, SSE, ..."
  EXPECT_EQ(info.versions.at("eigen").rfind("3.", 0), 0u);
  for (DType d : {DType::kBf16, DType::kFp16, DType::kFp32, DType::kTf32}) {
    EXPECT_EQ(dev->storage_dtype(d), DType::kFp32) << to_string(d);
  }
  EXPECT_NE(info.notes.find("computed in fp32"), std::string::npos) << info.notes;
  Tensor t = dev->allocate_tensor(10, DType::kBf16);
  EXPECT_EQ(t.dtype(), DType::kFp32);
  EXPECT_EQ(t.buffer().bytes(), 40u);
}

TEST(Device, DefaultThreadsNeverExceedTheCores) {
  auto dev = make_device(Backend::kCpu, 0);
  EXPECT_GE(dev->info().compute_units, 1);
  EXPECT_LE(dev->info().compute_units, dev->info().host_cores);
}

TEST(Device, UnavailableBackendsAreInputErrors) {
  EXPECT_THROW(make_device(Backend::kCpu, 1), InputError);
  if (cuda_device_count() > 0) GTEST_SKIP() << "this machine has a GPU";
  try {
    make_device(Backend::kCuda, 0);
    FAIL() << "a cuda device was made without a GPU";
  } catch (const InputError& e) {
    const std::string m = e.message();
    // Either the build has no cuda backend or the machine has no GPU; both say so.
    EXPECT_TRUE(m.find("built without CUDA") != std::string::npos ||
                m.find("sees no GPU") != std::string::npos)
        << m;
    EXPECT_NE(m.find("--backend cpu"), std::string::npos) << m;
  }
}

TEST(Device, LocalCommunicatorsNeedTheCudaBackend) {
  auto dev = make_device(Backend::kCpu, 0);
  EXPECT_THROW(make_local_communicators({dev.get(), dev.get()}), InputError);
}

TEST(Device, SliceStaysInsideItsTensor) {
  auto dev = make_device(Backend::kCpu, 0);
  Tensor t = dev->allocate_tensor(8, DType::kFp32);
  const TensorView s = t.view().slice(2, 6);
  EXPECT_EQ(static_cast<float*>(s.data), static_cast<float*>(t.view().data) + 2);
  EXPECT_EQ(s.numel, 6);
  EXPECT_THROW(t.view().slice(3, 6), InternalError);
}

}  // namespace
}  // namespace strata::rt

namespace strata::rt {

// The cpu device keeps freed blocks for the next tensor of the same size, and the
// memory accounting still counts live tensors only.
TEST(Device, CpuReusesFreedBlocksAndCountsOnlyLiveTensors) {
  auto device = make_device(Backend::kCpu, 0, {});
  void* first = nullptr;
  {
    Tensor t = device->allocate_tensor(300'000, DType::kFp32);  // 1.2 MB: glibc would mmap it
    first = t.view().data;
    EXPECT_EQ(device->memory_in_use_bytes(), 1'200'000);
  }
  EXPECT_EQ(device->memory_in_use_bytes(), 0);
  Tensor other_size = device->allocate_tensor(300'016, DType::kFp32);
  EXPECT_NE(other_size.view().data, first);
  Tensor same_size = device->allocate_tensor(300'000, DType::kFp32);
  EXPECT_EQ(same_size.view().data, first);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(same_size.view().data) % 64, 0u);  // a cache line, the widest vector load
  EXPECT_EQ(device->memory_in_use_bytes(), 2'400'064);
  EXPECT_EQ(device->peak_memory_bytes(), 2'400'064);
}

TEST(HostBlockCacheTest, GivesBackOnlyExactRoundedSizes) {
  HostBlockCache cache(64);
  void* a = cache.take(100);  // rounded to 128
  cache.give_back(a, 100);
  EXPECT_EQ(cache.cached_bytes(), 128u);
  void* b = cache.take(65);  // also 128: the same block
  EXPECT_EQ(b, a);
  EXPECT_EQ(cache.cached_bytes(), 0u);
  void* c = cache.take(129);  // 192: a new block
  EXPECT_NE(c, a);
  cache.give_back(b, 65);
  cache.give_back(c, 129);
  EXPECT_EQ(cache.cached_bytes(), 320u);
}

}  // namespace strata::rt
