// The device profile: what one device (GPU or CPU) can do.
//
// Shipped profiles (calib/profiles/) carry datasheet figures, each with its
// source; `strata calibrate` writes profiles of the same schema with measured,
// fitted cost models added. Profiles hold microbenchmark-level facts only: they
// are never fitted to end-to-end training results.
// The schema is documented in docs/formats.md ("profile.json").
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "core/dtype.h"

namespace strata {

// Datasheet facts of the device.
struct DeviceFacts {
  std::string name;                 // "NVIDIA A100-SXM4-80GB"
  std::string backend = "cuda";     // "cuda" | "cpu"
  int compute_units = 1;            // SMs (GPU) or cores (CPU): GEMM wave quantization
  double memory_bytes = 0.0;        // usable device memory
  double memory_bandwidth_bytes_per_s = 0.0;
  std::map<DType, double> peak_flops_per_s;  // dense, per dtype
  double nvlink_bandwidth_bytes_per_s = 0.0; // per GPU, per direction (0: none)
  double pcie_bandwidth_bytes_per_s = 0.0;   // host link, per direction
  std::map<std::string, std::string> sources;  // figure -> where it comes from

  // Peak dense FLOP/s for dtype; throws InputError-free InternalError when absent.
  double peak_flops(DType dtype) const;
};

// Memory the framework takes besides the model: named, documented parameters.
struct MemoryReserve {
  // CUDA context, cuBLAS workspaces, NCCL channels: taken before the first tensor.
  double framework_reserve_bytes = 0.0;
  // Share of the tensors' bytes lost to caching-allocator fragmentation.
  double allocator_fragmentation = 0.0;
  std::string source;
};

struct Profile {
  std::string name;
  std::string kind = "datasheet";   // "datasheet" | "calibrated"
  std::string file;                 // where it was read from
  DeviceFacts device;
  MemoryReserve memory;
  // Cost-model sections ("gemm", "memory_bound", "attention", "host_copy",
  // "collectives", "fit_quality", "provenance"), validated on reading and
  // interpreted by CostModel (costmodel/cost_model.h).
  nlohmann::json cost_sections = nlohmann::json::object();
};

// Reads a profile document strictly. file names it in errors.
Profile read_profile(const nlohmann::json& doc, const std::string& file);
// Resolves a path or shipped name (calib/profiles/) and reads it.
Profile load_profile(const std::string& path_or_name);
// The profile as JSON (same schema as read_profile accepts).
nlohmann::ordered_json to_json(const Profile& profile);

}  // namespace strata
