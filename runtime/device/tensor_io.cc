#include "runtime/device/tensor_io.h"

#include <Eigen/Core>
#include <fmt/format.h>

#include "core/error.h"

namespace strata::rt {
namespace {

// Host-side representation of one element of dtype, via Eigen's scalar types
// (round to nearest even, as the device converts).
template <class T>
std::vector<T> narrow(const std::vector<float>& values) {
  std::vector<T> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = static_cast<T>(values[i]);
  return out;
}

template <class T>
std::vector<float> widen(const std::vector<T>& values) {
  std::vector<float> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = static_cast<float>(values[i]);
  return out;
}

}  // namespace

float round_to_dtype(float value, DType dtype) {
  switch (dtype) {
    case DType::kBf16: return static_cast<float>(Eigen::bfloat16(value));
    case DType::kFp16: return static_cast<float>(Eigen::half(value));
    case DType::kFp32:
    case DType::kTf32: return value;
  }
  return value;
}

void upload_fp32(Device& device, const std::vector<float>& values, const TensorView& dst) {
  if (static_cast<std::int64_t>(values.size()) != dst.numel) {
    throw InternalError(fmt::format("upload_fp32: {} values for a tensor of {} elements",
                                    values.size(), dst.numel));
  }
  const auto bytes = static_cast<std::size_t>(dst.bytes());
  switch (dst.dtype) {
    case DType::kBf16: {
      auto host = narrow<Eigen::bfloat16>(values);
      device.copy_to_device(host.data(), dst.data, bytes);
      device.synchronize();
      return;
    }
    case DType::kFp16: {
      auto host = narrow<Eigen::half>(values);
      device.copy_to_device(host.data(), dst.data, bytes);
      device.synchronize();
      return;
    }
    case DType::kFp32:
    case DType::kTf32:
      device.copy_to_device(values.data(), dst.data, bytes);
      device.synchronize();
      return;
  }
}

std::vector<float> download_fp32(Device& device, const TensorView& src) {
  const auto n = static_cast<std::size_t>(src.numel);
  const auto bytes = static_cast<std::size_t>(src.bytes());
  switch (src.dtype) {
    case DType::kBf16: {
      std::vector<Eigen::bfloat16> host(n);
      device.copy_to_host(src.data, host.data(), bytes);
      device.synchronize();
      return widen(host);
    }
    case DType::kFp16: {
      std::vector<Eigen::half> host(n);
      device.copy_to_host(src.data, host.data(), bytes);
      device.synchronize();
      return widen(host);
    }
    case DType::kFp32:
    case DType::kTf32: break;
  }
  std::vector<float> host(n);
  device.copy_to_host(src.data, host.data(), bytes);
  device.synchronize();
  return host;
}

void upload_indices(Device& device, const std::vector<std::int32_t>& values, const IndexView& dst) {
  if (static_cast<std::int64_t>(values.size()) != dst.count) {
    throw InternalError(fmt::format("upload_indices: {} values for {} indices", values.size(),
                                    dst.count));
  }
  device.copy_to_device(values.data(), dst.data, values.size() * sizeof(std::int32_t));
  device.synchronize();
}

std::vector<std::int32_t> download_indices(Device& device, const IndexView& src) {
  std::vector<std::int32_t> host(static_cast<std::size_t>(src.count));
  device.copy_to_host(src.data, host.data(), host.size() * sizeof(std::int32_t));
  device.synchronize();
  return host;
}

void cross_entropy_forward(Device& device, const TensorView& logits, const IndexView& labels,
                           std::int64_t tokens, std::int64_t vocab, const TensorView& row_max,
                           const TensorView& sum_exp, const TensorView& target_logit,
                           const TensorView& loss) {
  device.cross_entropy_row_max(logits, tokens, vocab, row_max);
  device.cross_entropy_partials(logits, labels, tokens, vocab, 0, row_max, sum_exp, target_logit);
  device.cross_entropy_loss(row_max, sum_exp, target_logit, tokens, loss);
}

}  // namespace strata::rt
