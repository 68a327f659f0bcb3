#include "costmodel/log_interpolator.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "core/error.h"

namespace strata {
namespace {

// Squared log2 distance below which a query is the measured point itself.
constexpr double kSamePointSq = 1e-12;

}  // namespace

LogInterpolator::LogInterpolator(Eigen::MatrixXd coords, Eigen::VectorXd values)
    : coords_(std::move(coords)), values_(std::move(values)) {
  if (coords_.rows() != values_.size() || coords_.rows() == 0) {
    throw InternalError(fmt::format("interpolator needs as many values as points (>0): {} vs {}",
                                    coords_.rows(), values_.size()));
  }
}

double LogInterpolator::evaluate(const Eigen::VectorXd& x) const {
  const Eigen::Index n = coords_.rows();
  const Eigen::Index dim = coords_.cols();
  if (x.size() != dim) {
    throw InternalError(fmt::format("interpolator query has {} coordinates, expected {}", x.size(), dim));
  }
  Eigen::VectorXd dist_sq = (coords_.rowwise() - x.transpose()).rowwise().squaredNorm();
  std::vector<Eigen::Index> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  // Enough neighbours to fit a linear function with some redundancy (3x the
  // unknowns), ties broken by index so results do not depend on the sort.
  const Eigen::Index k = std::min<Eigen::Index>(n, 3 * (dim + 1));
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](Eigen::Index a, Eigen::Index b) {
                      return dist_sq(a) < dist_sq(b) || (dist_sq(a) == dist_sq(b) && a < b);
                    });
  if (dist_sq(order[0]) < kSamePointSq) return values_(order[0]);

  // Fit in coordinates relative to the neighbours' weighted centroid: the
  // intercept column is then orthogonal to the slope columns, and a direction
  // the neighbours do not span (all batch = 1, say) is a zero column that the
  // minimum-norm solution gives no slope, instead of leaking into the intercept.
  Eigen::VectorXd weight(k);
  Eigen::VectorXd centroid = Eigen::VectorXd::Zero(dim);
  double lo = values_(order[0]);
  double hi = lo;
  for (Eigen::Index i = 0; i < k; ++i) {
    const Eigen::Index p = order[static_cast<std::size_t>(i)];
    weight(i) = 1.0 / dist_sq(p);
    centroid += weight(i) * coords_.row(p).transpose();
    lo = std::min(lo, values_(p));
    hi = std::max(hi, values_(p));
  }
  centroid /= weight.sum();
  Eigen::MatrixXd a(k, dim + 1);
  Eigen::VectorXd b(k);
  for (Eigen::Index i = 0; i < k; ++i) {
    const Eigen::Index p = order[static_cast<std::size_t>(i)];
    const double w = std::sqrt(weight(i));
    a(i, 0) = w;
    a.row(i).tail(dim) = w * (coords_.row(p) - centroid.transpose());
    b(i) = w * values_(p);
  }
  Eigen::CompleteOrthogonalDecomposition<Eigen::MatrixXd> cod(a);
  cod.setThreshold(1e-9);
  const Eigen::VectorXd sol = cod.solve(b);
  const double value = sol(0) + sol.tail(dim).dot(x - centroid);
  return std::clamp(value, lo, hi);
}

}  // namespace strata
