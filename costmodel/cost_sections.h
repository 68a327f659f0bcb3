// The cost-model sections of a profile ("gemm", "memory_bound", "attention",
// "host_copy", "collectives", "fit_quality", "provenance", "rank_spread"): their in-memory form,
// strict reading and writing. docs/formats.md documents the JSON schema.
//
// Each cost section says where its figures come from: `origin` is "datasheet"
// (public figures, each with its source) or "measured" (`strata calibrate` ran
// the kernels on this device). A measured section keeps its datasheet parameters
// too, as the fall-back for what was not measured.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/collective.h"
#include "core/dtype.h"

namespace strata {

enum class Origin { kDatasheet, kMeasured };
const char* to_string(Origin origin);

// One measured size point: the median time over repeats and its spread.
struct SizePoint {
  double bytes = 0.0;
  double seconds = 0.0;
  double spread = 0.0;  // (third quartile - first quartile) / median of the repeats
};

// Time over message or buffer size: measured points (strictly increasing bytes)
// and the alpha-beta line fitted to them for extrapolation.
struct SizeCurveData {
  double alpha_s = 0.0;                // fixed cost
  double beta_bytes_per_s = 0.0;       // asymptotic bandwidth (> 0)
  std::vector<SizePoint> points;       // at least two
};

struct GemmPoint {
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
  double seconds = 0.0;
  double spread = 0.0;
};

struct GemmSection {
  Origin origin = Origin::kDatasheet;
  int tile_m = 1;                      // output tile per thread block (wave quantization)
  int tile_n = 1;
  double overhead_s = 0.0;             // per call (datasheet model only)
  std::map<DType, double> max_efficiency;  // share of peak large GEMMs reach
  // What max_efficiency measured: "burst" (a short run at boost clock, as MAMF),
  // "sustained" (after a thermal soak, at the power-limited clock a training step
  // runs at), or "" (the profile does not say).
  std::string ceiling;
  std::map<std::string, std::string> sources;
  std::map<DType, std::vector<GemmPoint>> measured;  // origin == measured
};

// Memory-bound kernel kinds, as named in the profile.
enum class KernelKind { kNorm, kSoftmax, kActivation, kResidual, kAdam, kCopy, kElementwise };
const char* to_string(KernelKind kind);
std::optional<KernelKind> parse_kernel_kind(const std::string& name);
const std::vector<KernelKind>& all_kernel_kinds();

struct MemoryBoundSection {
  Origin origin = Origin::kDatasheet;
  double efficiency = 1.0;             // share of memory bandwidth streaming kernels reach
  double overhead_s = 0.0;             // per kernel launch
  std::map<std::string, std::string> sources;
  std::map<KernelKind, SizeCurveData> measured;  // bytes moved -> time
};

struct AttentionPoint {
  DType dtype = DType::kBf16;
  std::int64_t batch_heads = 0, seq = 0, head_dim = 0;
  bool causal = false;
  bool backward = false;
  double seconds = 0.0;
  double spread = 0.0;
};

struct AttentionSection {
  Origin origin = Origin::kDatasheet;
  double forward_efficiency = 1.0;     // share of peak a fused forward reaches
  double backward_efficiency = 1.0;    // same for the backward pass
  double overhead_s = 0.0;
  std::map<std::string, std::string> sources;
  std::vector<AttentionPoint> measured;
};

struct HostCopySection {
  Origin origin = Origin::kDatasheet;
  double efficiency = 1.0;             // share of the PCIe datasheet bandwidth pinned copies reach
  double latency_s = 0.0;
  std::map<std::string, std::string> sources;
  std::optional<SizeCurveData> host_to_device;
  std::optional<SizeCurveData> device_to_host;
};

struct CollectiveCurve {
  CollectiveOp op = CollectiveOp::kAllReduce;
  int group_size = 2;
  bool inter_node = false;
  SizeCurveData curve;                 // bytes in nccl-tests' convention (core/collective.h)
};

struct CollectivesSection {
  Origin origin = Origin::kMeasured;
  // The bus bandwidth the datasheet model assumes per placement, against which
  // measured busbw is compared (collective efficiency). 0: unknown.
  double reference_intra_node_busbw_bytes_per_s = 0.0;
  double reference_inter_node_busbw_bytes_per_s = 0.0;
  std::map<std::string, std::string> sources;
  std::vector<CollectiveCurve> measured;
};

// Held-out error of one section's fitted model.
struct FitError {
  int held_out = 0;                    // measurements held out of the fit
  double median_rel_error = 0.0;
  double max_rel_error = 0.0;
};

struct Provenance {
  std::string host;
  std::string backend;
  std::string device;
  std::string date;                    // ISO 8601, UTC
  std::string command_line;
  std::string strata_version;
  int ranks = 1;
  int threads_per_rank = 1;
  std::map<std::string, std::string> libraries;  // name -> version
  std::map<std::string, std::string> details;    // driver, vector ISA, ...
};

// How differently the ranks of a calibration ran the same kernels (`strata
// calibrate` under mpirun): for each kernel every rank measured, the coefficient
// of variation of its median time across the ranks; the median over the kernels.
// A persistent difference between GPUs (silicon, cooling, power), not repeat noise.
struct RankSpread {
  int ranks = 0;       // >= 2
  int kernels = 0;     // kernels compared
  double median_cv = 0.0;
};

// Section keys a profile may carry besides "device" and "memory".
const std::vector<std::string>& cost_section_names();

// Strict readers: throw InputError naming file and the JSON path of the fault.
GemmSection read_gemm_section(const nlohmann::json& value, const std::string& file,
                              const std::string& path);
MemoryBoundSection read_memory_bound_section(const nlohmann::json& value, const std::string& file,
                                             const std::string& path);
AttentionSection read_attention_section(const nlohmann::json& value, const std::string& file,
                                        const std::string& path);
HostCopySection read_host_copy_section(const nlohmann::json& value, const std::string& file,
                                       const std::string& path);
CollectivesSection read_collectives_section(const nlohmann::json& value, const std::string& file,
                                            const std::string& path);
std::map<std::string, FitError> read_fit_quality(const nlohmann::json& value,
                                                 const std::string& file, const std::string& path);
Provenance read_provenance(const nlohmann::json& value, const std::string& file,
                           const std::string& path);
RankSpread read_rank_spread(const nlohmann::json& value, const std::string& file, const std::string& path);

// Writers: the JSON form the readers accept (same inputs, same bytes).
nlohmann::ordered_json to_json(const GemmSection& s);
nlohmann::ordered_json to_json(const MemoryBoundSection& s);
nlohmann::ordered_json to_json(const AttentionSection& s);
nlohmann::ordered_json to_json(const HostCopySection& s);
nlohmann::ordered_json to_json(const CollectivesSection& s);
nlohmann::ordered_json fit_quality_json(const std::map<std::string, FitError>& quality);
nlohmann::ordered_json to_json(const Provenance& p);
nlohmann::ordered_json to_json(const RankSpread& s);

// Reads the named section strictly (discarding the result). Throws InputError
// (file, path) when the section is malformed.
void check_cost_section(const std::string& section, const nlohmann::json& value,
                        const std::string& file, const std::string& path);

}  // namespace strata
