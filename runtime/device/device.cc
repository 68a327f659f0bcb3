#include "runtime/device/device.h"

#include <fmt/format.h>

#include "core/error.h"

namespace strata::rt {

Buffer::~Buffer() { reset(); }

Buffer::Buffer(Buffer&& other) noexcept
    : owner_(other.owner_), data_(other.data_), bytes_(other.bytes_), kind_(other.kind_) {
  other.owner_ = nullptr;
  other.data_ = nullptr;
  other.bytes_ = 0;
}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    reset();
    owner_ = other.owner_;
    data_ = other.data_;
    bytes_ = other.bytes_;
    kind_ = other.kind_;
    other.owner_ = nullptr;
    other.data_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

void Buffer::reset() {
  if (owner_ != nullptr && data_ != nullptr) owner_->release(*this);
  owner_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
}

TensorView TensorView::slice(std::int64_t offset, std::int64_t count) const {
  if (offset < 0 || count < 0 || offset + count > numel) {
    throw InternalError(fmt::format("TensorView::slice: [{}, {}) is outside a tensor of {} elements",
                                    offset, offset + count, numel));
  }
  return {static_cast<char*>(data) + offset * dtype_bytes(dtype), dtype, count};
}

Tensor::Tensor(Buffer buffer, DType dtype, std::int64_t numel)
    : buffer_(std::move(buffer)), dtype_(dtype), numel_(numel) {
  if (numel < 0 || static_cast<std::size_t>(numel) * dtype_bytes(dtype) > buffer_.bytes()) {
    throw InternalError(fmt::format("Tensor: {} elements of {} do not fit a buffer of {} bytes",
                                    numel, to_string(dtype), buffer_.bytes()));
  }
}

IndexTensor::IndexTensor(Buffer buffer, std::int64_t count)
    : buffer_(std::move(buffer)), count_(count) {
  if (count < 0 || static_cast<std::size_t>(count) * sizeof(std::int32_t) > buffer_.bytes()) {
    throw InternalError(fmt::format("IndexTensor: {} indices do not fit a buffer of {} bytes",
                                    count, buffer_.bytes()));
  }
}

DType Device::storage_dtype(DType requested) const {
  const auto& table = info().storage_dtype;
  auto it = table.find(requested);
  if (it == table.end()) {
    throw InternalError(fmt::format("{} device has no storage for dtype {}",
                                    to_string(backend()), to_string(requested)));
  }
  return it->second;
}

Buffer Device::allocate(std::size_t bytes, MemoryKind kind) {
  if (bytes == 0) return Buffer();
  void* data = raw_allocate(bytes, kind);
  if (kind == MemoryKind::kDevice) {
    in_use_bytes_ += static_cast<std::int64_t>(bytes);
    if (in_use_bytes_ > peak_bytes_) peak_bytes_ = in_use_bytes_;
  }
  return Buffer(this, data, bytes, kind);
}

Tensor Device::allocate_tensor(std::int64_t numel, DType requested) {
  if (numel < 0) throw InternalError(fmt::format("allocate_tensor: negative size {}", numel));
  const DType stored = storage_dtype(requested);
  return Tensor(allocate(static_cast<std::size_t>(numel) * dtype_bytes(stored)), stored, numel);
}

IndexTensor Device::allocate_indices(std::int64_t count) {
  if (count < 0) throw InternalError(fmt::format("allocate_indices: negative count {}", count));
  return IndexTensor(allocate(static_cast<std::size_t>(count) * sizeof(std::int32_t)), count);
}

void Device::release(Buffer& buffer) noexcept {
  raw_free(buffer.data_, buffer.bytes_, buffer.kind_);
  if (buffer.kind_ == MemoryKind::kDevice) in_use_bytes_ -= static_cast<std::int64_t>(buffer.bytes_);
}

}  // namespace strata::rt
