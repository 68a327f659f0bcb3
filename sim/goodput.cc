#include "sim/goodput.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "sim/sampling.h"

namespace strata::sim {
double young_interval_s(const FailureModel& f) { return std::sqrt(2.0 * f.checkpoint_s * f.job_mtbf_s); }

double daly_interval_s(const FailureModel& f) {
  const double d = f.checkpoint_s, m = f.job_mtbf_s;
  if (d >= 2.0 * m) return m;
  const double x = d / (2.0 * m);
  return std::sqrt(2.0 * d * m) * (1.0 + std::sqrt(x) / 3.0 + x / 9.0) - d;
}

double expected_wall_s(const FailureModel& f, double work_s, double interval_s) {
  const double m = f.job_mtbf_s;
  return m * std::exp(f.restart_s / m) * std::expm1((interval_s + f.checkpoint_s) / m) * work_s / interval_s;
}

SampledRun sample_run(const FailureModel& f, double work_s, double interval_s, std::uint64_t seed, int sample) {
  SampledRun run;
  std::uint64_t draw = 0;
  // The time to the next failure, from now: exponential of mean M (memoryless,
  // so a fresh draw after each failure).
  auto next_failure = [&] {
    return -f.job_mtbf_s * std::log(counter_uniform(seed, kFailureStream, static_cast<std::uint64_t>(sample), draw++));
  };
  double done = 0.0;      // work done, saved or not
  double durable = 0.0;   // work a restart resumes from: the last checkpoint written
  double pending = -1.0;  // an asynchronous checkpoint being written: the work it holds (-1: none)
  double written_in = 0.0;  // and the wall time until it is written
  double until_failure = next_failure();
  const bool planned = f.planned_interval_s > 0.0;
  double until_planned = f.planned_interval_s;
  // Time passes without a failure: an asynchronous write in flight progresses.
  auto elapse = [&](double t) {
    until_failure -= t;
    until_planned -= t;
    if (pending >= 0.0) {
      written_in -= t;
      if (written_in <= 0.0) {
        durable = pending;
        pending = -1.0;
      }
    }
  };
  while (done < work_s) {
    const double piece = std::min(interval_s, work_s - done);
    const bool last = done + piece >= work_s;
    // A new save waits for the previous write to be done (one snapshot buffer).
    const double wait = !last && pending >= 0.0 ? std::max(0.0, written_in - piece) : 0.0;
    const double save = last ? 0.0 : f.checkpoint_s + wait;  // none after the last piece
    if (planned && until_planned < piece + save && until_planned <= until_failure) {
      // A planned stop first: the work so far saved (the stop's own checkpoint,
      // asynchronously written before the job stops), a restart, nothing lost.
      const double at = std::max(0.0, until_planned);
      const double worked = std::min(at, piece);
      const double down = f.checkpoint_s + f.persist_s + f.restart_s;
      run.wall_s += at + down;
      run.checkpoints_s += at - worked;  // a piece's save cut short
      run.planned_s += down;
      ++run.planned;
      done += worked;
      durable = done;
      pending = -1.0;
      until_failure = next_failure();  // memoryless: a fresh draw after the downtime
      until_planned = f.planned_interval_s;
      continue;
    }
    if (until_failure >= piece + save) {
      run.wall_s += piece + save;
      run.checkpoints_s += save;
      elapse(piece + save);
      done += piece;
      if (!last) {
        if (f.persist_s > 0.0) {
          pending = done;
          written_in = f.persist_s;
        } else {
          durable = done;
        }
      }
      continue;
    }
    // Fails before the piece is saved (and, asynchronously, written): the work
    // since the last written checkpoint is lost; then the restart, which a
    // failure can interrupt too (it starts over).
    run.wall_s += until_failure;
    run.lost_s += until_failure;
    until_planned -= until_failure;
    // Pieces finished but not yet written (asynchronously) when the failure
    // strikes are lost too: their time is in the wall time already, and they are
    // done again. A write that completed before the failure counts.
    if (pending >= 0.0 && written_in <= until_failure) durable = pending;
    run.lost_s += done - durable;
    done = durable;
    pending = -1.0;
    ++run.failures;
    for (;;) {
      until_failure = next_failure();
      if (until_failure >= f.restart_s) break;
      run.wall_s += until_failure;
      run.restarts_s += until_failure;
      until_planned -= until_failure;
      ++run.failures;
    }
    run.wall_s += f.restart_s;
    run.restarts_s += f.restart_s;
    until_failure -= f.restart_s;
    until_planned -= f.restart_s;  // a planned stop due meanwhile comes first thing
  }
  return run;
}

GoodputEstimate estimate_goodput(const FailureModel& f, double work_s, double step_s, int samples,
                                 std::uint64_t seed, int interval_steps) {
  if (samples < 1 || !(f.job_mtbf_s > 0.0) || f.checkpoint_s < 0.0 || f.restart_s < 0.0 || !(step_s > 0.0) ||
      !(work_s > 0.0)) {
    throw InternalError("estimate_goodput: needs samples >= 1, M > 0, delta, R >= 0, a step and work > 0");
  }
  GoodputEstimate e;
  e.failures = f;
  e.work_s = work_s;
  e.step_s = step_s;
  e.young_s = young_interval_s(f);
  e.daly_s = daly_interval_s(f);
  // Megatron-LM saves every --save-interval steps: the interval in whole steps.
  auto steps_of = [&](double seconds) { return std::max(1, static_cast<int>(std::lround(seconds / step_s))); };
  // Asynchronously, a save cannot come sooner than the last one is written.
  e.interval_steps = interval_steps > 0 ? interval_steps : steps_of(std::max(e.daly_s, f.persist_s));
  e.interval_s = e.interval_steps * step_s;
  e.expected_wall_s = expected_wall_s(f, work_s, e.interval_s);

  std::vector<double> walls;
  for (int k = 0; k < samples; ++k) {
    const SampledRun r = sample_run(f, work_s, e.interval_s, seed, k);
    walls.push_back(r.wall_s);
    e.mean_wall_s += r.wall_s / samples;
    e.mean_failures += r.failures / static_cast<double>(samples);
    e.mean_checkpoints_s += r.checkpoints_s / samples;
    e.mean_lost_s += r.lost_s / samples;
    e.mean_restarts_s += r.restarts_s / samples;
    e.mean_planned += r.planned / static_cast<double>(samples);
    e.mean_planned_s += r.planned_s / samples;
  }
  e.p025_wall_s = quantile(walls, 0.025);
  e.p975_wall_s = quantile(walls, 0.975);

  // The sampled optimum over whole-step intervals from a quarter to four times
  // Daly's, geometrically spaced (2^(1/4) apart), each distinct one once.
  e.best_interval_steps = e.interval_steps;
  e.best_mean_wall_s = e.mean_wall_s;
  int last = -1;
  for (int i = -8; i <= 8; ++i) {
    const int steps = steps_of(e.daly_s * std::exp2(i / 4.0));
    if (steps == last || steps == e.interval_steps) continue;
    last = steps;
    double mean = 0.0;
    for (int k = 0; k < samples; ++k) mean += sample_run(f, work_s, steps * step_s, seed, k).wall_s / samples;
    if (mean < e.best_mean_wall_s) {
      e.best_mean_wall_s = mean;
      e.best_interval_steps = steps;
    }
  }
  return e;
}

}  // namespace strata::sim
