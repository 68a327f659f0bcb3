#include "gui/model/pareto_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.h"
#include "plan/plan_spec.h"
#include "sweep/plan_space.h"

namespace strata::gui {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

}  // namespace

ParetoData pareto_data(const SweepData& sweep) {
  ParetoData d;
  const int tokens = sweep.column("tokens_per_s"), peak = sweep.column("peak_bytes");
  const int tp = sweep.column("tp"), pp = sweep.column("pp"), front = sweep.column("pareto");
  const int capacity = sweep.column("capacity_bytes");
  if (tokens < 0 || peak < 0) return d;
  std::set<int> tps, pps;
  for (int r = 0; r < static_cast<int>(sweep.rows.size()); ++r) {
    const SweepRow& row = sweep.rows[r];
    if (capacity >= 0 && std::isfinite(row.numbers[capacity])) {
      d.capacity_gib = std::max(d.capacity_gib, row.numbers[capacity] / kGiB);
    }
    if (!row.fits || !std::isfinite(row.numbers[tokens]) || !std::isfinite(row.numbers[peak])) continue;
    ParetoPoint p;
    p.row = r;
    p.peak_gib = row.numbers[peak] / kGiB;
    p.tokens_per_s = row.numbers[tokens];
    p.tp = tp >= 0 && std::isfinite(row.numbers[tp]) ? static_cast<int>(row.numbers[tp]) : 1;
    p.pp = pp >= 0 && std::isfinite(row.numbers[pp]) ? static_cast<int>(row.numbers[pp]) : 1;
    p.front = front >= 0 && row.cells[front] == "true";
    tps.insert(p.tp);
    pps.insert(p.pp);
    if (p.front) d.front.push_back(static_cast<int>(d.points.size()));
    d.points.push_back(p);
  }
  std::sort(d.front.begin(), d.front.end(), [&](int a, int b) {
    return std::make_pair(d.points[a].peak_gib, d.points[a].tokens_per_s) <
           std::make_pair(d.points[b].peak_gib, d.points[b].tokens_per_s);
  });
  d.tps.assign(tps.begin(), tps.end());
  d.pps.assign(pps.begin(), pps.end());
  return d;
}

std::vector<double> nice_ticks(double lo, double hi, int max_ticks) {
  std::vector<double> out;
  if (!(hi > lo) || max_ticks < 2) return out;
  const double raw = (hi - lo) / (max_ticks - 1);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * magnitude;
    if (std::ceil(hi / step) - std::floor(lo / step) + 1 <= max_ticks) break;
  }
  for (double t = std::floor(lo / step) * step; t <= std::ceil(hi / step) * step + step * 1e-9; t += step) {
    out.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  }
  return out;
}

std::string describe_point(const SweepData& sweep, const ParetoPoint& p) {
  const SweepRow& row = sweep.rows[p.row];
  // The plan as the sweep table and the memory view name it (one label, sim::plan_label).
  std::string plan;
  try {
    plan = sim::plan_label(read_plan_spec(row.plan, sweep.file));
  } catch (const InputError&) {
    plan = row.plan.dump();  // not a plan the reader takes: as written
  }
  const int rank = sweep.column("rank");
  const std::string which = rank >= 0 && !row.cells[rank].empty() ? "plan " + row.cells[rank] : "a plan";
  return fmt::format("{} · {} · {:.0f} tokens/s · {:.1f} GiB peak{}", which, plan, p.tokens_per_s, p.peak_gib,
                     p.front ? " · on the Pareto front" : "");
}

}  // namespace strata::gui
