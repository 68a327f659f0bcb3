#include "costmodel/profile.h"

#include <fmt/format.h>

#include "costmodel/cost_sections.h"
#include "core/data_paths.h"
#include "core/error.h"
#include "core/json_reader.h"

namespace strata {
namespace {

constexpr double kGB = 1e9;
constexpr double kTera = 1e12;

DeviceFacts read_device(json::ObjectReader r) {
  DeviceFacts d;
  d.name = r.string("name");
  d.backend = r.choice("backend", {"cuda", "cpu"});
  d.compute_units = static_cast<int>(r.integer("compute_units", 1, 1 << 16));
  d.memory_bytes = r.number("memory_bytes", 1.0, 1e15);
  d.memory_bandwidth_bytes_per_s = r.number("memory_bandwidth_gbytes_per_s", 1e-3, 1e6) * kGB;
  json::ObjectReader peak = r.object("peak_tflops");
  for (const char* name : {"bf16", "fp16", "fp32", "tf32"}) {
    if (peak.has(name)) {
      d.peak_flops_per_s[*parse_dtype(name)] = peak.number(name, 1e-6, 1e6) * kTera;
    } else {
      peak.number_or(name, 0.0, 0.0, 0.0);  // registers the key as allowed
    }
  }
  peak.finish();
  if (d.peak_flops_per_s.empty()) {
    throw InputError(r.file(), r.path_of("peak_tflops"), "needs at least one dtype's peak");
  }
  d.nvlink_bandwidth_bytes_per_s = r.number_or("nvlink_gbytes_per_s", 0.0, 0.0, 1e6) * kGB;
  d.pcie_bandwidth_bytes_per_s = r.number_or("pcie_gbytes_per_s", 0.0, 0.0, 1e6) * kGB;
  if (r.has("sources")) {
    json::ObjectReader s = r.object("sources");
    for (auto it = s.value().begin(); it != s.value().end(); ++it) {
      d.sources[it.key()] = s.string(it.key());
    }
    s.finish();
  }
  r.finish();
  return d;
}

}  // namespace

double DeviceFacts::peak_flops(DType dtype) const {
  auto it = peak_flops_per_s.find(dtype);
  if (it != peak_flops_per_s.end()) return it->second;
  // fp16 and bf16 tensor-core peaks are equal on every device Strata knows;
  // fall back between them rather than fail.
  if (dtype == DType::kFp16 || dtype == DType::kBf16) {
    auto other = peak_flops_per_s.find(dtype == DType::kFp16 ? DType::kBf16 : DType::kFp16);
    if (other != peak_flops_per_s.end()) return other->second;
  }
  if (dtype == DType::kTf32) return peak_flops(DType::kFp32);
  throw InternalError(fmt::format("device {} has no peak FLOP/s for {}", name, to_string(dtype)));
}

Profile read_profile(const nlohmann::json& doc, const std::string& file) {
  json::ObjectReader r(doc, file);
  Profile p;
  p.file = file;
  std::string schema = r.string("schema");
  if (schema != "strata-profile/1") {
    r.fail("schema", "expected \"strata-profile/1\", got \"" + schema + "\"");
  }
  p.name = r.string("name");
  p.kind = r.choice("kind", {"datasheet", "calibrated"});
  p.device = read_device(r.object("device"));
  if (r.has("memory")) {
    json::ObjectReader m = r.object("memory");
    p.memory.framework_reserve_bytes = m.number_or("framework_reserve_bytes", 0.0, 0.0, 1e13);
    p.memory.allocator_fragmentation = m.number_or("allocator_fragmentation", 0.0, 0.0, 0.9);
    if (m.has("source")) p.memory.source = m.string("source");
    m.finish();
  }
  for (const std::string& section : cost_section_names()) {
    if (r.has(section)) {
      const nlohmann::json& value = r.raw(section);
      check_cost_section(section, value, file, r.path_of(section));
      p.cost_sections[section] = value;
    } else {
      r.allow_text(section);  // registers the key as allowed
    }
  }
  r.allow_text("source");
  r.allow_text("notes");
  r.finish();
  return p;
}

Profile load_profile(const std::string& path_or_name) {
  std::string path = resolve_data_file(path_or_name, "calib/profiles", "profile");
  return read_profile(json::parse_file(path), path);
}

nlohmann::ordered_json to_json(const Profile& p) {
  nlohmann::ordered_json j;
  j["schema"] = "strata-profile/1";
  j["name"] = p.name;
  j["kind"] = p.kind;
  nlohmann::ordered_json d;
  d["name"] = p.device.name;
  d["backend"] = p.device.backend;
  d["compute_units"] = p.device.compute_units;
  d["memory_bytes"] = p.device.memory_bytes;
  d["memory_bandwidth_gbytes_per_s"] = p.device.memory_bandwidth_bytes_per_s / kGB;
  nlohmann::ordered_json peak;
  for (const auto& [dtype, flops] : p.device.peak_flops_per_s) peak[to_string(dtype)] = flops / kTera;
  d["peak_tflops"] = peak;
  d["nvlink_gbytes_per_s"] = p.device.nvlink_bandwidth_bytes_per_s / kGB;
  d["pcie_gbytes_per_s"] = p.device.pcie_bandwidth_bytes_per_s / kGB;
  if (!p.device.sources.empty()) {
    nlohmann::ordered_json s;
    for (const auto& [k, v] : p.device.sources) s[k] = v;
    d["sources"] = s;
  }
  j["device"] = d;
  nlohmann::ordered_json m;
  m["framework_reserve_bytes"] = p.memory.framework_reserve_bytes;
  m["allocator_fragmentation"] = p.memory.allocator_fragmentation;
  if (!p.memory.source.empty()) m["source"] = p.memory.source;
  j["memory"] = m;
  for (const std::string& section : cost_section_names()) {
    if (p.cost_sections.contains(section)) j[section] = p.cost_sections[section];
  }
  return j;
}

}  // namespace strata
