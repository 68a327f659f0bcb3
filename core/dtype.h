// Element types of the tensors a training step moves and multiplies.
#pragma once

#include <optional>
#include <string>

namespace strata {

enum class DType { kBf16, kFp16, kFp32, kTf32 };

inline const char* to_string(DType d) {
  switch (d) {
    case DType::kBf16: return "bf16";
    case DType::kFp16: return "fp16";
    case DType::kFp32: return "fp32";
    case DType::kTf32: return "tf32";
  }
  return "bf16";
}

// Bytes per element as stored (tf32 is stored as fp32).
inline int dtype_bytes(DType d) { return (d == DType::kBf16 || d == DType::kFp16) ? 2 : 4; }

inline std::optional<DType> parse_dtype(const std::string& s) {
  if (s == "bf16") return DType::kBf16;
  if (s == "fp16") return DType::kFp16;
  if (s == "fp32") return DType::kFp32;
  if (s == "tf32") return DType::kTf32;
  return std::nullopt;
}

}  // namespace strata
