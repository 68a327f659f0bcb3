#include "costmodel/size_curve.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <Eigen/Dense>
#include <fmt/format.h>

#include "core/error.h"

namespace strata {
namespace {

// A per-byte cost this small means "no measurable size dependence": the line is flat.
constexpr double kFlatInverseBandwidth = 1e-21;  // s per byte (10^21 B/s)

}  // namespace

AlphaBeta fit_alpha_beta(const std::vector<SizePoint>& points) {
  if (points.size() < 2) {
    throw InternalError(fmt::format("alpha-beta fit needs at least 2 points, got {}", points.size()));
  }
  const Eigen::Index n = static_cast<Eigen::Index>(points.size());
  // Relative error of point i: (alpha/t_i + g * x_i/t_i) - 1, with g = 1/beta.
  Eigen::MatrixXd a(n, 2);
  Eigen::VectorXd b = Eigen::VectorXd::Ones(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const SizePoint& p = points[static_cast<std::size_t>(i)];
    if (!(p.seconds > 0.0) || !(p.bytes >= 0.0)) {
      throw InternalError(fmt::format("alpha-beta fit: bad point ({} bytes, {} s)", p.bytes, p.seconds));
    }
    a(i, 0) = 1.0 / p.seconds;
    a(i, 1) = p.bytes / p.seconds;
  }
  // The columns differ by many orders of magnitude: scale them to unit norm so
  // the QR's rank decision is about geometry, not units.
  Eigen::Vector2d scale(a.col(0).norm(), a.col(1).norm());
  if (!(scale(1) > 0.0)) throw InternalError("alpha-beta fit needs points with non-zero sizes");
  Eigen::MatrixXd scaled = a;
  scaled.col(0) /= scale(0);
  scaled.col(1) /= scale(1);
  Eigen::Vector2d sol = scaled.colPivHouseholderQr().solve(b);
  double alpha = sol(0) / scale(0);
  double g = sol(1) / scale(1);

  if (!(alpha >= 0.0) || !std::isfinite(alpha)) {
    // Best line through the origin: minimise sum (g x_i/t_i - 1)^2.
    alpha = 0.0;
    g = a.col(1).sum() / a.col(1).squaredNorm();
  }
  if (!(g > 0.0) || !std::isfinite(g)) {
    // Time does not grow with size over the measured range: a flat line.
    g = kFlatInverseBandwidth;
    alpha = a.col(0).sum() / a.col(0).squaredNorm();
  }
  return AlphaBeta{alpha, 1.0 / g};
}

SizeCurveData make_size_curve(std::vector<SizePoint> points) {
  if (points.size() < 2) {
    throw InternalError(fmt::format("a size curve needs at least 2 points, got {}", points.size()));
  }
  for (std::size_t i = 1; i < points.size(); ++i) {
    if (!(points[i].bytes > points[i - 1].bytes)) {
      throw InternalError("a size curve needs strictly increasing sizes");
    }
  }
  AlphaBeta ab = fit_alpha_beta(points);
  SizeCurveData c;
  c.alpha_s = ab.alpha_s;
  c.beta_bytes_per_s = ab.beta_bytes_per_s;
  c.points = std::move(points);
  return c;
}

double curve_seconds(const SizeCurveData& c, double bytes) {
  const AlphaBeta ab{c.alpha_s, c.beta_bytes_per_s};
  // log(measured / line) at a point: how far the real curve bends off the line.
  auto log_ratio = [&ab](const SizePoint& p) { return std::log(p.seconds / ab.seconds(p.bytes)); };
  const SizePoint& first = c.points.front();
  const SizePoint& last = c.points.back();
  if (bytes <= first.bytes) return ab.seconds(std::max(bytes, 0.0)) * std::exp(log_ratio(first));
  if (bytes >= last.bytes) return ab.seconds(bytes) * std::exp(log_ratio(last));
  auto upper = std::upper_bound(c.points.begin(), c.points.end(), bytes,
                                [](double v, const SizePoint& p) { return v < p.bytes; });
  const SizePoint& hi = *upper;
  const SizePoint& lo = *(upper - 1);
  const double u = std::log(bytes / lo.bytes) / std::log(hi.bytes / lo.bytes);
  return ab.seconds(bytes) * std::exp((1.0 - u) * log_ratio(lo) + u * log_ratio(hi));
}

}  // namespace strata
