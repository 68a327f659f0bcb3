#include "gui/model/sweep_format.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace strata::gui {
namespace {

enum class Kind { kText, kInteger, kSeconds, kPercent, kGiB, kRate, kTflops };

struct Known {
  const char* header;
  Kind kind;
  const char* meaning;
};

// The columns of docs/formats.md ("sweep.csv") in words.
const std::map<std::string, Known>& known_columns() {
  static const std::map<std::string, Known> columns = {
      {"rank", {"rank", Kind::kText, "1 = fastest plan that fits"}},
      {"tp", {"TP", Kind::kText, "tensor-parallel size"}},
      {"cp", {"CP", Kind::kText, "context-parallel size"}},
      {"pp", {"PP", Kind::kText, "pipeline-parallel size"}},
      {"dp", {"DP", Kind::kText, "data-parallel size"}},
      {"vpp", {"VPP", Kind::kText, "virtual pipeline stages per rank"}},
      {"ep", {"EP", Kind::kText, "expert-parallel size"}},
      {"etp", {"ETP", Kind::kText, "expert tensor-parallel size"}},
      {"micro_batch_size", {"micro-batch", Kind::kText, "sequences per micro-batch"}},
      {"global_batch_size", {"global batch", Kind::kText, "sequences per step"}},
      {"schedule", {"schedule", Kind::kText, "pipeline schedule"}},
      {"zero_stage", {"ZeRO", Kind::kText, "ZeRO stage (1: optimizer state sharded, 2: and gradients, 3: and weights)"}},
      {"zero_shard_size", {"ZeRO shard", Kind::kText, "ranks a ZeRO shard group spans (hybrid sharding)"}},
      {"offload_optimizer", {"offload", Kind::kText, "optimizer state in host memory"}},
      {"recompute", {"recompute", Kind::kText, "activation recomputation"}},
      {"sequence_parallel", {"SP", Kind::kText, "sequence parallelism"}},
      {"flash_attention", {"flash attn", Kind::kText, "fused attention kernel"}},
      {"cp_comm_type", {"CP comm", Kind::kText, "context-parallel exchange"}},
      {"moe_token_dispatcher_type", {"dispatcher", Kind::kText, "MoE token dispatcher"}},
      {"decoder_first_pipeline_num_layers", {"first stage layers", Kind::kText, "layers on the first stage"}},
      {"decoder_last_pipeline_num_layers", {"last stage layers", Kind::kText, "layers on the last stage"}},
      {"fits", {"fits", Kind::kText, "fits in memory"}},
      {"step_time_s", {"step time", Kind::kSeconds, "time per training step"}},
      {"p50_step_time_s", {"P50 step", Kind::kSeconds, "median step time under clock variation"}},
      {"p90_step_time_s", {"P90 step", Kind::kSeconds, "90th-percentile step time under clock variation"}},
      {"compute_s", {"compute", Kind::kSeconds, "compute time per step, mean over ranks"}},
      {"exposed_tp_s", {"exposed TP", Kind::kSeconds, "tensor-parallel communication not hidden, per step"}},
      {"exposed_cp_s", {"exposed CP", Kind::kSeconds, "context-parallel communication not hidden, per step"}},
      {"exposed_ep_s", {"exposed EP", Kind::kSeconds, "expert-parallel communication not hidden, per step"}},
      {"exposed_pp_s", {"exposed PP", Kind::kSeconds, "pipeline transfers not hidden, per step"}},
      {"exposed_dp_s", {"exposed DP", Kind::kSeconds, "data-parallel communication not hidden, per step"}},
      {"exposed_zero_s", {"exposed ZeRO", Kind::kSeconds, "ZeRO gathers and reductions not hidden, per step"}},
      {"exposed_offload_s", {"exposed offload", Kind::kSeconds, "host copies not hidden, per step"}},
      {"tokens_per_s", {"tokens/s", Kind::kRate, "training throughput"}},
      {"mfu", {"MFU", Kind::kPercent, "model FLOPs utilisation"}},
      {"hfu", {"HFU", Kind::kPercent, "hardware FLOPs utilisation (recompute counted)"}},
      {"tflops_per_gpu", {"TFLOP/s per GPU", Kind::kTflops, "model FLOPs per second per GPU"}},
      {"bubble_ratio", {"bubble", Kind::kPercent, "pipeline bubble share of the step"}},
      {"headroom", {"headroom", Kind::kPercent, "1 - peak / capacity"}},
      {"peak_bytes", {"peak memory", Kind::kGiB, "peak memory per GPU"}},
      {"capacity_bytes", {"capacity", Kind::kGiB, "usable memory per GPU"}},
      {"pareto", {"Pareto", Kind::kText, "on the front of tokens/s against headroom"}},
      {"fidelity", {"fidelity", Kind::kText, "simulated at full or folded fidelity"}},
      {"why", {"why", Kind::kText, "why it ranks where it does"}},
      {"prune_reason", {"why not", Kind::kText, "why it was not simulated"}},
  };
  return columns;
}

// Decimals that show the column's largest magnitude with three significant digits
// (at least one digit: 10.3, 400, 0.52 → 0.520).
int decimals_for(double largest) {
  if (!(largest > 0.0)) return 0;
  return std::clamp(2 - static_cast<int>(std::floor(std::log10(largest))), 0, 3);
}

std::string grouped(long long v) {
  std::string digits = std::to_string(v < 0 ? -v : v);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

}  // namespace

std::vector<ColumnFormat> sweep_column_formats(const SweepData& sweep) {
  std::vector<ColumnFormat> out;
  for (std::size_t c = 0; c < sweep.columns.size(); ++c) {
    const std::string& name = sweep.columns[c];
    ColumnFormat f;
    f.name = name;
    const auto it = known_columns().find(name);
    if (it == known_columns().end()) {
      f.header = name;
      f.tooltip = name;
      out.push_back(f);
      continue;
    }
    const Known& k = it->second;
    double largest = 0.0;
    for (const SweepRow& row : sweep.rows) {
      const double v = row.numbers[c];
      if (std::isfinite(v)) largest = std::max(largest, std::abs(v));
    }
    std::string unit;
    switch (k.kind) {
      case Kind::kText:
      case Kind::kInteger:
        break;
      case Kind::kSeconds:
        // One unit for the column, from its largest value.
        if (largest >= 1.0 || largest == 0.0) {
          unit = "s";
        } else if (largest >= 1e-3) {
          unit = "ms";
          f.scale = 1e3;
        } else {
          unit = "µs";
          f.scale = 1e6;
        }
        f.decimals = decimals_for(largest * f.scale);
        break;
      case Kind::kPercent:
        unit = "%";
        f.scale = 100.0;
        f.decimals = 1;
        break;
      case Kind::kGiB:
        unit = "GiB";
        f.scale = 1.0 / (1024.0 * 1024.0 * 1024.0);
        f.decimals = 1;
        break;
      case Kind::kRate:
        f.decimals = 0;
        f.thousands = true;
        break;
      case Kind::kTflops:
        f.decimals = 1;
        break;
    }
    f.header = unit.empty() ? k.header : fmt::format("{} ({})", k.header, unit);
    f.tooltip = fmt::format("{}: {}", name, k.meaning);
    out.push_back(f);
  }
  return out;
}

std::string format_cell(const ColumnFormat& f, const std::string& text, double number) {
  if (f.decimals < 0 || std::isnan(number) || text == "true" || text == "false") return text;
  const double v = number * f.scale;
  if (f.thousands) return grouped(std::llround(v));
  return fmt::format("{:.{}f}", v, f.decimals);
}

}  // namespace strata::gui
