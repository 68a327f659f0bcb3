#include "costmodel/attention_kernel.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "core/data_paths.h"
#include "core/error.h"
#include "core/json_reader.h"

namespace strata {
namespace {

constexpr double kTera = 1e12;

std::vector<double> positive_numbers(json::ObjectReader& r, const std::string& key) {
  const nlohmann::json& a = r.array(key);
  std::vector<double> out;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!a[i].is_number() || !(a[i].get<double>() > 0.0)) {
      throw InputError(r.file(), r.element_path(key, i), "expected a number > 0");
    }
    out.push_back(a[i].get<double>());
  }
  return out;
}

AttentionCurve read_curve(json::ObjectReader r) {
  AttentionCurve c;
  const nlohmann::json& devices = r.array("devices");
  for (std::size_t i = 0; i < devices.size(); ++i) {
    if (!devices[i].is_string()) throw InputError(r.file(), r.element_path("devices", i), "expected a device name");
    c.devices.push_back(devices[i].get<std::string>());
  }
  if (c.devices.empty()) throw InputError(r.file(), r.path_of("devices"), "needs at least one device name");
  const std::string pass = r.choice("pass", {"forward", "backward", "forward+backward"});
  c.pass = pass == "forward" ? AttentionPass::kForward
           : pass == "backward" ? AttentionPass::kBackward
                                : AttentionPass::kForwardBackward;
  c.causal = r.boolean("causal");
  c.head_dim = static_cast<int>(r.integer("head_dim", 1, 4096));
  c.seq = positive_numbers(r, "seq");
  for (double t : positive_numbers(r, "tflops")) c.flops_per_s.push_back(t * kTera);
  if (c.seq.empty()) throw InputError(r.file(), r.path_of("seq"), "needs at least one sequence length");
  if (c.flops_per_s.size() != c.seq.size()) {
    throw InputError(r.file(), r.path_of("tflops"),
                     fmt::format("needs one rate per sequence length ({}), got {}", c.seq.size(), c.flops_per_s.size()));
  }
  for (std::size_t i = 1; i < c.seq.size(); ++i) {
    if (!(c.seq[i] > c.seq[i - 1])) throw InputError(r.file(), r.element_path("seq", i), "sequence lengths must increase");
  }
  c.source = r.string("source");
  r.allow_text("notes");
  r.finish();
  return c;
}

// Interpolated in log2(seq), held flat outside the measured range.
double rate_at(const AttentionCurve& c, double seq) {
  if (seq <= c.seq.front()) return c.flops_per_s.front();
  if (seq >= c.seq.back()) return c.flops_per_s.back();
  const auto hi = static_cast<std::size_t>(std::upper_bound(c.seq.begin(), c.seq.end(), seq) - c.seq.begin());
  const std::size_t lo = hi - 1;
  const double t = (std::log2(seq) - std::log2(c.seq[lo])) / (std::log2(c.seq[hi]) - std::log2(c.seq[lo]));
  return c.flops_per_s[lo] + t * (c.flops_per_s[hi] - c.flops_per_s[lo]);
}

}  // namespace

std::optional<AttentionRate> AttentionKernel::rate(const std::string& device, bool causal, std::int64_t head_dim,
                                                   std::int64_t seq, bool backward) const {
  std::vector<const AttentionCurve*> mine;
  for (const AttentionCurve& c : curves) {
    if (std::find(c.devices.begin(), c.devices.end(), device) != c.devices.end()) mine.push_back(&c);
  }
  if (mine.empty()) return std::nullopt;
  // The nearest head dimension measured, in log2; the larger on a tie.
  int best_dim = 0;
  double best_distance = 0.0;
  for (const AttentionCurve* c : mine) {
    const double distance = std::abs(std::log2(static_cast<double>(c->head_dim)) - std::log2(static_cast<double>(head_dim)));
    if (best_dim == 0 || distance < best_distance || (distance == best_distance && c->head_dim > best_dim)) {
      best_dim = c->head_dim;
      best_distance = distance;
    }
  }
  const AttentionPass own = backward ? AttentionPass::kBackward : AttentionPass::kForward;
  auto find = [&](AttentionPass pass, bool with_mask) -> const AttentionCurve* {
    for (const AttentionCurve* c : mine) {
      if (c->head_dim == best_dim && c->pass == pass && c->causal == with_mask) return c;
    }
    return nullptr;
  };
  for (bool with_mask : {causal, false}) {
    for (AttentionPass pass : {own, AttentionPass::kForwardBackward}) {
      if (const AttentionCurve* c = find(pass, with_mask)) return AttentionRate{rate_at(*c, static_cast<double>(seq)), c};
    }
  }
  return std::nullopt;  // only causal curves and a causal-free query
}

bool AttentionKernel::measured_on(const std::string& device) const {
  return std::any_of(curves.begin(), curves.end(), [&](const AttentionCurve& c) {
    return std::find(c.devices.begin(), c.devices.end(), device) != c.devices.end();
  });
}

AttentionKernel read_attention_kernel(const nlohmann::json& doc, const std::string& file) {
  json::ObjectReader r(doc, file);
  AttentionKernel k;
  k.file = file;
  k.name = r.string("name");
  k.description = r.string("description");
  k.source = r.string("source");
  r.allow_text("notes");
  const nlohmann::json& curves = r.array("curves");
  for (std::size_t i = 0; i < curves.size(); ++i) {
    k.curves.push_back(read_curve(json::ObjectReader(curves[i], file, r.element_path("curves", i))));
  }
  r.finish();
  return k;
}

AttentionKernel load_attention_kernel(const std::string& path_or_name) {
  const std::string path = resolve_data_file(path_or_name, "scenarios/attention-kernels", "attention kernel");
  return read_attention_kernel(json::parse_file(path), path);
}

const AttentionKernel& attention_kernel(const std::string& path_or_name) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<const AttentionKernel>> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = loaded[path_or_name];
  if (!slot) slot = std::make_unique<const AttentionKernel>(load_attention_kernel(path_or_name));
  return *slot;
}

}  // namespace strata
