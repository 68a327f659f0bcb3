#include "gui/model/result_data.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/json_reader.h"

namespace strata::gui {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double bytes_of(json::ObjectReader& r, const std::string& key) { return r.number(key, 0.0, kInf); }

}  // namespace

MemoryReport read_memory_object(const nlohmann::json& memory, const std::string& file,
                                const std::string& path) {
  json::ObjectReader r(memory, file, path);
  MemoryReport m;
  const nlohmann::json& stages = r.array("stages");
  if (!stages.is_array() || stages.empty()) {
    r.fail("stages", "expected a non-empty array of pipeline stages");
  }
  for (std::size_t i = 0; i < stages.size(); ++i) {
    json::ObjectReader s(stages[i], file, r.element_path("stages", i));
    StageMemory st;
    st.stage = static_cast<int>(s.integer_or("stage", static_cast<std::int64_t>(i), 0, 1000000));
    st.layers = static_cast<int>(s.integer_or("layers", 0, 0, 1000000));
    st.params_bytes = bytes_of(s, "params_bytes");
    st.grads_bytes = bytes_of(s, "grads_bytes");
    st.optimizer_bytes = bytes_of(s, "optimizer_bytes");
    st.activations_bytes = bytes_of(s, "activations_bytes");
    st.buffers_bytes = s.number_or("buffers_bytes", 0.0, 0.0, kInf);
    st.reserve_bytes = s.number_or("reserve_bytes", 0.0, 0.0, kInf);
    st.total_bytes = bytes_of(s, "total_bytes");
    st.host_bytes = s.number_or("host_bytes", 0.0, 0.0, kInf);
    st.fits = s.boolean_or("fits", true);
    m.stages.push_back(st);
  }
  m.capacity_bytes = r.number("capacity_bytes", 0.0, kInf);
  m.peak_bytes = r.number_or("peak_bytes", 0.0, 0.0, kInf);
  m.peak_stage = static_cast<int>(r.integer_or("peak_stage", 0, 0, 1000000));
  m.fits = r.boolean_or("fits", m.peak_bytes <= m.capacity_bytes);
  m.host_bytes_per_gpu = r.number_or("host_bytes_per_gpu", 0.0, 0.0, kInf);
  if (m.peak_bytes == 0.0) {
    for (const StageMemory& st : m.stages) {
      if (st.total_bytes > m.peak_bytes) {
        m.peak_bytes = st.total_bytes;
        m.peak_stage = st.stage;
      }
    }
  }
  return m;
}

namespace {

SampledFigure read_figure(json::ObjectReader r) {
  SampledFigure f;
  f.value = r.number("value", 0.0, kInf);
  const nlohmann::json& ci = r.array("ci95");
  if (ci.size() != 2 || !ci[0].is_number() || !ci[1].is_number() || ci[0].get<double>() > ci[1].get<double>()) {
    r.fail("ci95", "expected [low, high], two numbers, low <= high, got " + json::describe(ci));
  }
  f.ci_low = ci[0].get<double>();
  f.ci_high = ci[1].get<double>();
  return f;
}

// result.json's `distribution` (docs/formats.md).
StepDistributionData read_distribution(json::ObjectReader r) {
  StepDistributionData d;
  d.clock_cv = r.number_or("clock_cv", 0.0, 0.0, 1.0);
  d.origin = r.string_or("origin", "");
  d.noiseless_step_time_s = r.number("noiseless_step_time_s", 0.0, kInf);
  d.mean = read_figure(r.object("mean_s"));
  d.p50 = read_figure(r.object("p50_s"));
  d.p90 = read_figure(r.object("p90_s"));
  d.p99 = read_figure(r.object("p99_s"));
  const nlohmann::json& steps = r.array("step_time_s");
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (!steps[i].is_number() || !(steps[i].get<double>() > 0.0) || !std::isfinite(steps[i].get<double>())) {
      throw InputError(r.file(), r.element_path("step_time_s", i),
                       "expected a step time in seconds (> 0), got " + json::describe(steps[i]));
    }
    d.step_time_s.push_back(steps[i].get<double>());
  }
  if (d.step_time_s.empty()) r.fail("step_time_s", "expected the sampled steps, got none");
  if (r.has("traced_sample")) {
    d.traced_sample = static_cast<int>(
        r.object("traced_sample").integer("sample", 0, static_cast<std::int64_t>(d.step_time_s.size()) - 1));
  }
  return d;
}

// result.json's `what_if`: who was slowed, in the words of `strata simulate`'s flags.
WhatIfData read_what_if(json::ObjectReader r) {
  WhatIfData w;
  w.baseline_step_time_s = r.number("baseline_step_time_s", 0.0, kInf);
  w.step_time_s = r.number("step_time_s", 0.0, kInf);
  std::vector<std::string> who;
  auto each = [&](const char* key, auto&& describe) {
    if (!r.has(key)) return;
    const nlohmann::json& list = r.array(key);
    for (std::size_t i = 0; i < list.size(); ++i) who.push_back(describe(json::ObjectReader(list[i], r.file(), r.element_path(key, i))));
  };
  // slow_ranks lists a slowed node's GPUs too: name the nodes when there are any.
  each(r.has("slow_nodes") ? "slow_nodes" : "slow_ranks", [](json::ObjectReader x) {
    const bool node = x.has("node");
    return fmt::format("{} {} x{:.2f}", node ? "node" : "rank", x.integer(node ? "node" : "rank", 0, 100000000),
                       x.number("factor", 0.0, kInf));
  });
  each("slow_nics", [](json::ObjectReader x) {
    return fmt::format("node {} NIC {} at 1/{:.2f}", x.integer("node", 0, 100000000), x.integer("nic", 0, 1000),
                       x.number("factor", 0.0, kInf));
  });
  each("slow_links", [](json::ObjectReader x) {
    return fmt::format("link {} - {} at 1/{:.2f}", x.string("from"), x.string("to"), x.number("factor", 0.0, kInf));
  });
  for (const std::string& s : who) w.slowed += (w.slowed.empty() ? "" : ", ") + s;
  return w;
}

}  // namespace

ResultData read_result_object(const nlohmann::json& result, const std::string& file,
                              const std::string& path) {
  json::ObjectReader r(result, file, path);
  ResultData d;
  d.file = file;
  d.step_time_s = r.number("step_time_s", 0.0, kInf);
  d.mfu = r.number_or("mfu", 0.0, 0.0, 10.0);
  d.hfu = r.number_or("hfu", 0.0, 0.0, 10.0);
  d.tflops_per_gpu = r.number_or("tflops_per_gpu", 0.0, 0.0, kInf);
  d.hw_tflops_per_gpu = r.number_or("hw_tflops_per_gpu", 0.0, 0.0, kInf);
  d.tokens_per_s = r.number_or("tokens_per_s", 0.0, 0.0, kInf);
  d.bubble_ratio = r.number_or("bubble_ratio", 0.0, 0.0, 1.0);
  d.bubble_ratio_analytic = r.number_or("bubble_ratio_analytic", 0.0, 0.0, 1.0);
  d.peer_wait_s = r.number_or("peer_wait_s", 0.0, 0.0, kInf);
  if (r.has("bubble_ratio_per_stage")) {
    const nlohmann::json& per_stage = r.array("bubble_ratio_per_stage");
    for (std::size_t i = 0; i < per_stage.size(); ++i) {
      if (!per_stage[i].is_number()) {
        throw InputError(file, r.element_path("bubble_ratio_per_stage", i),
                         "expected a number in [0, 1], got " + json::describe(per_stage[i]));
      }
      d.bubble_ratio_per_stage.push_back(per_stage[i].get<double>());
    }
  }
  if (r.has("exposed_comm_s")) {
    json::ObjectReader e = r.object("exposed_comm_s");
    d.exposed.tp_s = e.number_or("tp", 0.0, 0.0, kInf);
    d.exposed.pp_s = e.number_or("pp", 0.0, 0.0, kInf);
    d.exposed.dp_s = e.number_or("dp", 0.0, 0.0, kInf);
    d.exposed.zero_s = e.number_or("zero", 0.0, 0.0, kInf);
    d.exposed.cp_s = e.number_or("cp", -1.0, 0.0, kInf);
    d.exposed.ep_s = e.number_or("ep", -1.0, 0.0, kInf);
  }
  d.compute_s = r.number_or("compute_s", 0.0, 0.0, kInf);
  d.num_gpus = static_cast<int>(r.integer_or("num_gpus", 0, 0, 100000000));
  d.events = r.integer_or("events", 0, 0, std::numeric_limits<std::int64_t>::max());
  d.fidelity = r.choice_or("fidelity", "", {"full", "folded"});
  if (r.has("memory")) d.memory = read_memory_object(r.raw("memory"), file, r.path_of("memory"));
  if (r.has("link_utilization")) {
    const nlohmann::json& links = r.array("link_utilization");
    for (std::size_t i = 0; i < links.size(); ++i) {
      json::ObjectReader l(links[i], file, r.element_path("link_utilization", i));
      LinkUse u;
      u.from = l.string("from");
      u.to = l.string("to");
      u.kind = l.string_or("kind", "");
      u.bandwidth_bytes_per_s = l.number_or("bandwidth_bytes_per_s", 0.0, 0.0, kInf);
      u.bytes = l.number_or("bytes", 0.0, 0.0, kInf);
      u.utilization = l.number("utilization", 0.0, 1.0);
      d.links.push_back(std::move(u));
    }
  }
  if (r.has("distribution")) d.distribution = read_distribution(r.object("distribution"));
  if (r.has("what_if")) d.what_if = read_what_if(r.object("what_if"));
  if (r.has("inputs")) d.inputs = r.raw("inputs");
  return d;
}

ResultData read_result_file(const std::string& path) {
  const nlohmann::json doc = json::parse_file(path);
  json::ObjectReader r(doc, path);
  const std::string schema = r.string("schema");
  if (schema != "strata-result/1") {
    r.fail("schema", "expected \"strata-result/1\" (a result.json of `strata simulate`), got \"" +
                         schema + "\"");
  }
  return read_result_object(doc, path, "$");
}

MemoryFile read_memory_file(const std::string& path) {
  const nlohmann::json doc = json::parse_file(path);
  json::ObjectReader r(doc, path);
  MemoryFile f;
  f.file = path;
  f.memory = read_memory_object(r.raw("memory"), path, r.path_of("memory"));
  if (r.has("inputs")) f.inputs = r.raw("inputs");
  return f;
}

std::string describe_inputs(const nlohmann::json& inputs) {
  if (!inputs.is_object()) return "";
  std::string out;
  auto model = inputs.find("model");
  if (model != inputs.end() && model->is_object() && model->contains("name") &&
      (*model)["name"].is_string()) {
    out = (*model)["name"].get<std::string>();
  }
  auto plan = inputs.find("plan");
  if (plan != inputs.end() && plan->is_object()) {
    auto get = [&](const char* key) -> std::string {
      auto it = plan->find(key);
      return it != plan->end() && it->is_number_integer() ? std::to_string(it->get<int>()) : "?";
    };
    if (!out.empty()) out += " · ";
    const std::string cp = get("cp");
    out += fmt::format("tp {}{} pp {} dp {}", get("tp"), cp == "?" || cp == "1" ? "" : " cp " + cp, get("pp"),
                       get("dp"));
  }
  auto cluster = inputs.find("cluster");
  if (cluster != inputs.end() && cluster->is_object() && cluster->contains("name") &&
      (*cluster)["name"].is_string()) {
    out += " · " + (*cluster)["name"].get<std::string>();
  }
  return out;
}

}  // namespace strata::gui
