#include "costmodel/cost_sections.h"

#include <limits>

#include <fmt/format.h>

#include "core/error.h"
#include "core/json_reader.h"

namespace strata {
namespace {

// A timing spread (interquartile range over median) has no upper bound: on a
// busy host one descheduled sample of three can make it 100x or more, and the
// profile records what was measured (calibration warns about it).
constexpr double kUnboundedSpread = std::numeric_limits<double>::infinity();

using json::ObjectReader;

constexpr double kUs = 1e-6;
constexpr double kGB = 1e9;
// Generous bounds that still catch unit mistakes (a time in ns given as µs is fine,
// a negative or absurd one is not).
constexpr double kMaxTimeUs = 3.6e9;       // one hour
constexpr double kMaxBytes = 1e15;
constexpr double kMaxGbytesPerS = 1e7;
constexpr std::int64_t kMaxDim = std::int64_t{1} << 40;

const std::vector<std::string>& dtype_names() {
  static const std::vector<std::string> names = {"bf16", "fp16", "fp32", "tf32"};
  return names;
}

const std::vector<std::string>& collective_names() {
  static const std::vector<std::string> names = {"all_reduce", "all_gather", "reduce_scatter",
                                                 "broadcast",  "all_to_all", "send_recv"};
  return names;
}

Origin read_origin(ObjectReader& r) {
  return r.choice("origin", {"datasheet", "measured"}) == "measured" ? Origin::kMeasured
                                                                      : Origin::kDatasheet;
}

std::map<std::string, std::string> read_sources(ObjectReader& r) {
  std::map<std::string, std::string> out;
  if (!r.has("sources")) {
    r.allow_text("sources");
    return out;
  }
  ObjectReader s = r.object("sources");
  for (auto it = s.value().begin(); it != s.value().end(); ++it) out[it.key()] = s.string(it.key());
  s.finish();
  return out;
}

// Measured sections must say where the datasheet fall-back parameters come from
// too; a datasheet section must carry a source for every figure it has.
void require_sources(const ObjectReader& r, const std::map<std::string, std::string>& sources,
                     const std::vector<std::string>& figures) {
  for (const std::string& f : figures) {
    if (sources.count(f) == 0) {
      r.fail("sources", "needs a source for \"" + f + "\" (where the figure comes from)");
    }
  }
}

// The end every section's reader shares: its measured points agree with its
// origin ("measured" needs some, "datasheet" none), notes are free text, and no
// other key is allowed.
void finish_section(ObjectReader& r, Origin origin, bool has_measured, const char* points) {
  if (origin == Origin::kMeasured && !has_measured) {
    r.fail("origin", fmt::format("is \"measured\" but the section has no \"measured\" {}", points));
  }
  if (origin == Origin::kDatasheet && has_measured) {
    r.fail("origin", fmt::format("is \"datasheet\" but the section has \"measured\" {}; say \"measured\"", points));
  }
  r.allow_text("notes");
  r.finish();
}

// Whether the section has a "measured" part; when it has none, a text in its
// place is allowed (a note why nothing was measured).
bool has_measured_part(ObjectReader& r) {
  if (r.has("measured")) return true;
  r.allow_text("measured");
  return false;
}

SizePoint read_size_point(const nlohmann::json& v, const std::string& file,
                          const std::string& path) {
  ObjectReader r(v, file, path);
  SizePoint p;
  p.bytes = r.number("bytes", 1.0, kMaxBytes);
  p.seconds = r.number("time_us", 1e-6, kMaxTimeUs) * kUs;
  p.spread = r.number_or("spread", 0.0, 0.0, kUnboundedSpread);
  r.finish();
  return p;
}

// Reads alpha_us, beta_gbytes_per_s and points from r (which the caller finishes).
SizeCurveData read_curve(ObjectReader& r) {
  SizeCurveData c;
  c.alpha_s = r.number("alpha_us", 0.0, kMaxTimeUs) * kUs;
  c.beta_bytes_per_s = r.number("beta_gbytes_per_s", 1e-9, kMaxGbytesPerS) * kGB;
  const nlohmann::json& pts = r.array("points");
  if (pts.size() < 2) r.fail("points", fmt::format("needs at least 2 points, got {}", pts.size()));
  for (std::size_t i = 0; i < pts.size(); ++i) {
    c.points.push_back(read_size_point(pts[i], r.file(), r.element_path("points", i)));
    if (i > 0 && !(c.points[i].bytes > c.points[i - 1].bytes)) {
      throw InputError(r.file(), r.element_path("points", i) + ".bytes",
                       fmt::format("points must have strictly increasing bytes; {} follows {}",
                                   c.points[i].bytes, c.points[i - 1].bytes));
    }
  }
  return c;
}

SizeCurveData read_curve_object(const nlohmann::json& v, const std::string& file,
                                const std::string& path) {
  ObjectReader r(v, file, path);
  SizeCurveData c = read_curve(r);
  r.finish();
  return c;
}

nlohmann::ordered_json curve_json(const SizeCurveData& c) {
  nlohmann::ordered_json j;
  j["alpha_us"] = c.alpha_s / kUs;
  j["beta_gbytes_per_s"] = c.beta_bytes_per_s / kGB;
  nlohmann::ordered_json pts = nlohmann::ordered_json::array();
  for (const SizePoint& p : c.points) {
    nlohmann::ordered_json e;
    e["bytes"] = p.bytes;
    e["time_us"] = p.seconds / kUs;
    e["spread"] = p.spread;
    pts.push_back(e);
  }
  j["points"] = pts;
  return j;
}

nlohmann::ordered_json sources_json(const std::map<std::string, std::string>& sources) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& [k, v] : sources) j[k] = v;
  return j;
}

// The frame every section's writer shares, in the order its reader takes it:
// "origin", the section's own parameters (in their order), "sources", and
// "measured" when the section has measurements.
nlohmann::ordered_json section_json(Origin origin, const nlohmann::ordered_json& parameters,
                                    const std::map<std::string, std::string>& sources,
                                    std::optional<nlohmann::ordered_json> measured) {
  nlohmann::ordered_json j;
  j["origin"] = to_string(origin);
  for (const auto& [key, value] : parameters.items()) j[key] = value;
  j["sources"] = sources_json(sources);
  if (measured) j["measured"] = std::move(*measured);
  return j;
}

}  // namespace

const char* to_string(Origin origin) {
  return origin == Origin::kMeasured ? "measured" : "datasheet";
}

const char* to_string(KernelKind kind) {
  switch (kind) {
    case KernelKind::kNorm: return "norm";
    case KernelKind::kSoftmax: return "softmax";
    case KernelKind::kActivation: return "activation";
    case KernelKind::kResidual: return "residual";
    case KernelKind::kAdam: return "adam";
    case KernelKind::kCopy: return "copy";
    case KernelKind::kElementwise: return "elementwise";
  }
  return "elementwise";
}

const std::vector<KernelKind>& all_kernel_kinds() {
  static const std::vector<KernelKind> kinds = {
      KernelKind::kNorm, KernelKind::kSoftmax, KernelKind::kActivation, KernelKind::kResidual,
      KernelKind::kAdam, KernelKind::kCopy,    KernelKind::kElementwise};
  return kinds;
}

std::optional<KernelKind> parse_kernel_kind(const std::string& name) {
  for (KernelKind k : all_kernel_kinds()) {
    if (name == to_string(k)) return k;
  }
  return std::nullopt;
}

const std::vector<std::string>& cost_section_names() {
  static const std::vector<std::string> names = {"gemm",        "memory_bound", "attention",
                                                 "host_copy",   "collectives",  "fit_quality",
                                                 "provenance",  "rank_spread"};
  return names;
}

// ---------------------------------------------------------------- gemm

GemmSection read_gemm_section(const nlohmann::json& value, const std::string& file,
                              const std::string& path) {
  ObjectReader r(value, file, path);
  GemmSection s;
  s.origin = read_origin(r);
  s.tile_m = static_cast<int>(r.integer("tile_m", 1, 4096));
  s.tile_n = static_cast<int>(r.integer("tile_n", 1, 4096));
  s.overhead_s = r.number("overhead_us", 0.0, 1e6) * kUs;
  ObjectReader eff = r.object("max_efficiency");
  for (const std::string& name : dtype_names()) {
    if (eff.has(name)) {
      s.max_efficiency[*parse_dtype(name)] = eff.number(name, 1e-3, 1.0);
    } else {
      eff.allow_text(name);
    }
  }
  eff.finish();
  if (r.has("ceiling")) s.ceiling = r.choice("ceiling", {"burst", "sustained"});
  if (s.max_efficiency.empty()) {
    r.fail("max_efficiency", "needs the efficiency of at least one dtype (\"bf16\", ...)");
  }
  s.sources = read_sources(r);
  require_sources(r, s.sources, {"max_efficiency", "tile", "overhead_us"});
  if (has_measured_part(r)) {
    ObjectReader m = r.object("measured");
    for (const std::string& name : dtype_names()) {
      if (!m.has(name)) {
        m.allow_text(name);
        continue;
      }
      const nlohmann::json& pts = m.array(name);
      std::vector<GemmPoint>& out = s.measured[*parse_dtype(name)];
      for (std::size_t i = 0; i < pts.size(); ++i) {
        ObjectReader p(pts[i], file, m.element_path(name, i));
        GemmPoint g;
        g.m = p.integer("m", 1, kMaxDim);
        g.n = p.integer("n", 1, kMaxDim);
        g.k = p.integer("k", 1, kMaxDim);
        g.batch = p.integer_or("batch", 1, 1, kMaxDim);
        g.seconds = p.number("time_us", 1e-6, kMaxTimeUs) * kUs;
        g.spread = p.number_or("spread", 0.0, 0.0, kUnboundedSpread);
        p.finish();
        out.push_back(g);
      }
      if (out.empty()) m.fail(name, "needs at least one measured GEMM");
    }
    m.finish();
  }
  finish_section(r, s.origin, !s.measured.empty(), "GEMMs");
  return s;
}

nlohmann::ordered_json to_json(const GemmSection& s) {
  nlohmann::ordered_json j;
  j["tile_m"] = s.tile_m;
  j["tile_n"] = s.tile_n;
  j["overhead_us"] = s.overhead_s / kUs;
  nlohmann::ordered_json eff;
  for (const auto& [d, e] : s.max_efficiency) eff[to_string(d)] = e;
  j["max_efficiency"] = eff;
  if (!s.ceiling.empty()) j["ceiling"] = s.ceiling;
  std::optional<nlohmann::ordered_json> measured;
  if (!s.measured.empty()) {
    nlohmann::ordered_json m;
    for (const auto& [d, pts] : s.measured) {
      nlohmann::ordered_json arr = nlohmann::ordered_json::array();
      for (const GemmPoint& g : pts) {
        nlohmann::ordered_json e;
        e["m"] = g.m;
        e["n"] = g.n;
        e["k"] = g.k;
        e["batch"] = g.batch;
        e["time_us"] = g.seconds / kUs;
        e["spread"] = g.spread;
        arr.push_back(e);
      }
      m[to_string(d)] = arr;
    }
    measured = std::move(m);
  }
  return section_json(s.origin, j, s.sources, std::move(measured));
}

// ---------------------------------------------------------------- memory_bound

MemoryBoundSection read_memory_bound_section(const nlohmann::json& value, const std::string& file,
                                             const std::string& path) {
  ObjectReader r(value, file, path);
  MemoryBoundSection s;
  s.origin = read_origin(r);
  s.efficiency = r.number("efficiency", 1e-3, 1.0);
  s.overhead_s = r.number("overhead_us", 0.0, 1e6) * kUs;
  s.sources = read_sources(r);
  require_sources(r, s.sources, {"efficiency", "overhead_us"});
  if (has_measured_part(r)) {
    ObjectReader m = r.object("measured");
    for (KernelKind k : all_kernel_kinds()) {
      const std::string name = to_string(k);
      if (m.has(name)) {
        s.measured[k] = read_curve_object(m.raw(name), file, m.path_of(name));
      } else {
        m.allow_text(name);
      }
    }
    m.finish();
  }
  finish_section(r, s.origin, !s.measured.empty(), "kernels");
  return s;
}

nlohmann::ordered_json to_json(const MemoryBoundSection& s) {
  nlohmann::ordered_json j;
  j["efficiency"] = s.efficiency;
  j["overhead_us"] = s.overhead_s / kUs;
  std::optional<nlohmann::ordered_json> measured;
  if (!s.measured.empty()) {
    nlohmann::ordered_json m;
    for (const auto& [k, c] : s.measured) m[to_string(k)] = curve_json(c);
    measured = std::move(m);
  }
  return section_json(s.origin, j, s.sources, std::move(measured));
}

// ---------------------------------------------------------------- attention

AttentionSection read_attention_section(const nlohmann::json& value, const std::string& file,
                                        const std::string& path) {
  ObjectReader r(value, file, path);
  AttentionSection s;
  s.origin = read_origin(r);
  s.forward_efficiency = r.number("forward_efficiency", 1e-3, 1.0);
  s.backward_efficiency = r.number("backward_efficiency", 1e-3, 1.0);
  s.overhead_s = r.number("overhead_us", 0.0, 1e6) * kUs;
  s.sources = read_sources(r);
  require_sources(r, s.sources, {"forward_efficiency", "backward_efficiency", "overhead_us"});
  if (has_measured_part(r)) {
    const nlohmann::json& pts = r.array("measured");
    for (std::size_t i = 0; i < pts.size(); ++i) {
      ObjectReader p(pts[i], file, r.element_path("measured", i));
      AttentionPoint a;
      a.dtype = *parse_dtype(p.choice("dtype", dtype_names()));
      a.batch_heads = p.integer("batch_heads", 1, kMaxDim);
      a.seq = p.integer("seq", 1, kMaxDim);
      a.head_dim = p.integer("head_dim", 1, 65536);
      a.causal = p.boolean("causal");
      a.backward = p.boolean("backward");
      a.seconds = p.number("time_us", 1e-6, kMaxTimeUs) * kUs;
      a.spread = p.number_or("spread", 0.0, 0.0, kUnboundedSpread);
      p.finish();
      s.measured.push_back(a);
    }
  }
  finish_section(r, s.origin, !s.measured.empty(), "points");
  return s;
}

nlohmann::ordered_json to_json(const AttentionSection& s) {
  nlohmann::ordered_json j;
  j["forward_efficiency"] = s.forward_efficiency;
  j["backward_efficiency"] = s.backward_efficiency;
  j["overhead_us"] = s.overhead_s / kUs;
  std::optional<nlohmann::ordered_json> measured;
  if (!s.measured.empty()) {
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const AttentionPoint& a : s.measured) {
      nlohmann::ordered_json e;
      e["dtype"] = to_string(a.dtype);
      e["batch_heads"] = a.batch_heads;
      e["seq"] = a.seq;
      e["head_dim"] = a.head_dim;
      e["causal"] = a.causal;
      e["backward"] = a.backward;
      e["time_us"] = a.seconds / kUs;
      e["spread"] = a.spread;
      arr.push_back(e);
    }
    measured = std::move(arr);
  }
  return section_json(s.origin, j, s.sources, std::move(measured));
}

// ---------------------------------------------------------------- host_copy

HostCopySection read_host_copy_section(const nlohmann::json& value, const std::string& file,
                                       const std::string& path) {
  ObjectReader r(value, file, path);
  HostCopySection s;
  s.origin = read_origin(r);
  s.efficiency = r.number("efficiency", 1e-3, 1.0);
  s.latency_s = r.number("latency_us", 0.0, 1e6) * kUs;
  s.sources = read_sources(r);
  require_sources(r, s.sources, {"efficiency", "latency_us"});
  if (has_measured_part(r)) {
    ObjectReader m = r.object("measured");
    if (m.has("host_to_device")) {
      s.host_to_device = read_curve_object(m.raw("host_to_device"), file, m.path_of("host_to_device"));
    } else {
      m.allow_text("host_to_device");
    }
    if (m.has("device_to_host")) {
      s.device_to_host = read_curve_object(m.raw("device_to_host"), file, m.path_of("device_to_host"));
    } else {
      m.allow_text("device_to_host");
    }
    m.finish();
  }
  const bool any = s.host_to_device || s.device_to_host;
  finish_section(r, s.origin, any, "copies");
  return s;
}

nlohmann::ordered_json to_json(const HostCopySection& s) {
  nlohmann::ordered_json j;
  j["efficiency"] = s.efficiency;
  j["latency_us"] = s.latency_s / kUs;
  std::optional<nlohmann::ordered_json> measured;
  if (s.host_to_device || s.device_to_host) {
    nlohmann::ordered_json m;
    if (s.host_to_device) m["host_to_device"] = curve_json(*s.host_to_device);
    if (s.device_to_host) m["device_to_host"] = curve_json(*s.device_to_host);
    measured = std::move(m);
  }
  return section_json(s.origin, j, s.sources, std::move(measured));
}

// ---------------------------------------------------------------- collectives

CollectivesSection read_collectives_section(const nlohmann::json& value, const std::string& file,
                                            const std::string& path) {
  ObjectReader r(value, file, path);
  CollectivesSection s;
  // Collective times have no datasheet form here: the topology model costs them.
  r.choice("origin", {"measured"});
  s.origin = Origin::kMeasured;
  if (r.has("reference_busbw_gbytes_per_s")) {
    ObjectReader ref = r.object("reference_busbw_gbytes_per_s");
    s.reference_intra_node_busbw_bytes_per_s =
        ref.number_or("intra_node", 0.0, 0.0, kMaxGbytesPerS) * kGB;
    s.reference_inter_node_busbw_bytes_per_s =
        ref.number_or("inter_node", 0.0, 0.0, kMaxGbytesPerS) * kGB;
    ref.finish();
  } else {
    r.allow_text("reference_busbw_gbytes_per_s");
  }
  s.sources = read_sources(r);
  if (s.reference_intra_node_busbw_bytes_per_s > 0 || s.reference_inter_node_busbw_bytes_per_s > 0) {
    require_sources(r, s.sources, {"reference_busbw_gbytes_per_s"});
  }
  const nlohmann::json& curves = r.array("measured");
  if (curves.empty()) r.fail("measured", "needs at least one measured collective");
  for (std::size_t i = 0; i < curves.size(); ++i) {
    const std::string at = r.element_path("measured", i);
    ObjectReader c(curves[i], file, at);
    CollectiveCurve cc;
    cc.op = *parse_collective_op(c.choice("op", collective_names()));
    cc.group_size = static_cast<int>(c.integer("group_size", 2, 1 << 20));
    cc.inter_node = c.boolean("inter_node");
    cc.curve = read_curve(c);
    c.finish();
    for (const CollectiveCurve& other : s.measured) {
      if (other.op == cc.op && other.group_size == cc.group_size &&
          other.inter_node == cc.inter_node) {
        throw InputError(file, at,
                         fmt::format("duplicate curve for {} over {} ranks ({})", to_string(cc.op),
                                     cc.group_size, cc.inter_node ? "inter-node" : "intra-node"));
      }
    }
    s.measured.push_back(std::move(cc));
  }
  r.allow_text("notes");
  r.finish();
  return s;
}

nlohmann::ordered_json to_json(const CollectivesSection& s) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  if (s.reference_intra_node_busbw_bytes_per_s > 0 || s.reference_inter_node_busbw_bytes_per_s > 0) {
    nlohmann::ordered_json ref;
    if (s.reference_intra_node_busbw_bytes_per_s > 0) {
      ref["intra_node"] = s.reference_intra_node_busbw_bytes_per_s / kGB;
    }
    if (s.reference_inter_node_busbw_bytes_per_s > 0) {
      ref["inter_node"] = s.reference_inter_node_busbw_bytes_per_s / kGB;
    }
    j["reference_busbw_gbytes_per_s"] = ref;
  }
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const CollectiveCurve& c : s.measured) {
    nlohmann::ordered_json e;
    e["op"] = to_string(c.op);
    e["group_size"] = c.group_size;
    e["inter_node"] = c.inter_node;
    const nlohmann::ordered_json curve = curve_json(c.curve);
    e["alpha_us"] = curve["alpha_us"];
    e["beta_gbytes_per_s"] = curve["beta_gbytes_per_s"];
    e["points"] = curve["points"];
    arr.push_back(e);
  }
  return section_json(s.origin, j, s.sources, std::move(arr));
}

// ---------------------------------------------------------------- fit_quality

std::map<std::string, FitError> read_fit_quality(const nlohmann::json& value,
                                                 const std::string& file, const std::string& path) {
  ObjectReader r(value, file, path);
  std::map<std::string, FitError> out;
  for (const char* section : {"gemm", "memory_bound", "attention", "host_copy", "collectives"}) {
    if (!r.has(section)) {
      r.allow_text(section);
      continue;
    }
    ObjectReader q = r.object(section);
    FitError e;
    e.held_out = static_cast<int>(q.integer("held_out", 0, 1 << 30));
    e.median_rel_error = q.number("median_rel_error", 0.0, 1e6);
    e.max_rel_error = q.number("max_rel_error", 0.0, 1e6);
    q.finish();
    if (e.max_rel_error < e.median_rel_error) {
      throw InputError(file, q.path_of("max_rel_error"),
                       "must be at least median_rel_error (" +
                           fmt::format("{:g}", e.median_rel_error) + ")");
    }
    out[section] = e;
  }
  r.allow_text("notes");
  r.finish();
  return out;
}

nlohmann::ordered_json fit_quality_json(const std::map<std::string, FitError>& quality) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const char* section : {"gemm", "memory_bound", "attention", "host_copy", "collectives"}) {
    auto it = quality.find(section);
    if (it == quality.end()) continue;
    nlohmann::ordered_json e;
    e["held_out"] = it->second.held_out;
    e["median_rel_error"] = it->second.median_rel_error;
    e["max_rel_error"] = it->second.max_rel_error;
    j[section] = e;
  }
  return j;
}

// ---------------------------------------------------------------- provenance

Provenance read_provenance(const nlohmann::json& value, const std::string& file,
                           const std::string& path) {
  ObjectReader r(value, file, path);
  Provenance p;
  p.host = r.string("host");
  p.backend = r.choice("backend", {"cpu", "cuda"});
  p.device = r.string("device");
  p.date = r.string("date");
  p.command_line = r.string("command_line");
  p.strata_version = r.string("strata_version");
  p.ranks = static_cast<int>(r.integer("ranks", 1, 1 << 20));
  p.threads_per_rank = static_cast<int>(r.integer("threads_per_rank", 1, 1 << 16));
  auto read_strings = [&r](const std::string& key, std::map<std::string, std::string>& target) {
    if (!r.has(key)) {
      r.allow_text(key);
      return;
    }
    ObjectReader o = r.object(key);
    for (auto it = o.value().begin(); it != o.value().end(); ++it) target[it.key()] = o.string(it.key());
    o.finish();
  };
  read_strings("libraries", p.libraries);
  read_strings("details", p.details);
  r.allow_text("notes");
  r.finish();
  return p;
}

nlohmann::ordered_json to_json(const Provenance& p) {
  nlohmann::ordered_json j;
  j["host"] = p.host;
  j["backend"] = p.backend;
  j["device"] = p.device;
  j["date"] = p.date;
  j["command_line"] = p.command_line;
  j["strata_version"] = p.strata_version;
  j["ranks"] = p.ranks;
  j["threads_per_rank"] = p.threads_per_rank;
  j["libraries"] = sources_json(p.libraries);
  j["details"] = sources_json(p.details);
  return j;
}

// ---------------------------------------------------------------- rank_spread

RankSpread read_rank_spread(const nlohmann::json& value, const std::string& file, const std::string& path) {
  ObjectReader r(value, file, path);
  RankSpread s;
  s.ranks = static_cast<int>(r.integer("ranks", 2, 1 << 20));
  s.kernels = static_cast<int>(r.integer("kernels", 1, 1 << 30));
  s.median_cv = r.number("median_cv", 0.0, 10.0);
  r.allow_text("notes");
  r.finish();
  return s;
}

nlohmann::ordered_json to_json(const RankSpread& s) {
  nlohmann::ordered_json j;
  j["ranks"] = s.ranks;
  j["kernels"] = s.kernels;
  j["median_cv"] = s.median_cv;
  return j;
}

void check_cost_section(const std::string& section, const nlohmann::json& value,
                        const std::string& file, const std::string& path) {
  if (section == "gemm") {
    read_gemm_section(value, file, path);
  } else if (section == "memory_bound") {
    read_memory_bound_section(value, file, path);
  } else if (section == "attention") {
    read_attention_section(value, file, path);
  } else if (section == "host_copy") {
    read_host_copy_section(value, file, path);
  } else if (section == "collectives") {
    read_collectives_section(value, file, path);
  } else if (section == "fit_quality") {
    read_fit_quality(value, file, path);
  } else if (section == "provenance") {
    read_provenance(value, file, path);
  } else if (section == "rank_spread") {
    read_rank_spread(value, file, path);
  } else {
    throw InternalError("check_cost_section: unknown section " + section);
  }
}

}  // namespace strata
