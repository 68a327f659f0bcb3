#include "runtime/comm/gather_bytes.h"

#include <algorithm>
#include <cstdint>

#include "runtime/device/tensor_io.h"

namespace strata::rt {

std::vector<std::string> all_gather_bytes(Communicator& world, const std::string& mine) {
  Device& device = world.device();
  const int n = world.size();
  // Lengths as two base-2^20 digits, exact in fp32.
  constexpr std::int64_t kDigit = 1 << 20;
  const auto length = static_cast<std::int64_t>(mine.size());
  Tensor my_length = device.allocate_tensor(2, DType::kFp32);
  Tensor lengths = device.allocate_tensor(2 * n, DType::kFp32);
  upload_fp32(device, {static_cast<float>(length / kDigit), static_cast<float>(length % kDigit)}, my_length.view());
  world.all_gather(my_length.view(), lengths.view());
  const std::vector<float> got = download_fp32(device, lengths.view());
  std::vector<std::int64_t> sizes(n);
  std::int64_t longest = 0;
  for (int r = 0; r < n; ++r) {
    sizes[r] = static_cast<std::int64_t>(got[2 * r]) * kDigit + static_cast<std::int64_t>(got[2 * r + 1]);
    longest = std::max(longest, sizes[r]);
  }
  // Two bytes per element, every rank's block padded to the longest.
  const std::int64_t words = std::max<std::int64_t>(1, (longest + 1) / 2);
  auto byte = [](const std::string& s, std::size_t i) {
    return i < s.size() ? static_cast<unsigned>(static_cast<unsigned char>(s[i])) : 0u;
  };
  std::vector<float> packed(static_cast<std::size_t>(words), 0.0f);
  for (std::size_t w = 0; w < packed.size(); ++w) {
    packed[w] = static_cast<float>(byte(mine, 2 * w) | byte(mine, 2 * w + 1) << 8);
  }
  Tensor send = device.allocate_tensor(words, DType::kFp32);
  Tensor recv = device.allocate_tensor(words * n, DType::kFp32);
  upload_fp32(device, packed, send.view());
  world.all_gather(send.view(), recv.view());
  const std::vector<float> all = download_fp32(device, recv.view());
  std::vector<std::string> out(n);
  for (int r = 0; r < n; ++r) {
    std::string& s = out[r];
    s.resize(static_cast<std::size_t>(sizes[r]));
    for (std::size_t i = 0; i < s.size(); ++i) {
      const auto word = static_cast<unsigned>(all[static_cast<std::size_t>(r * words) + i / 2]);
      s[i] = static_cast<char>(static_cast<unsigned char>(i % 2 == 0 ? word & 0xffu : word >> 8));
    }
  }
  return out;
}

}  // namespace strata::rt
