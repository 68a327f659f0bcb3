// Scattered-data interpolation of a smooth quantity (log efficiency) over shapes
// given in log2 coordinates: GEMM (m, n, k, batch), attention (batch*heads, seq,
// head size).
//
// At a query point it fits a linear function to the nearest measured points by
// weighted least squares (weights 1/distance^2, Eigen's complete orthogonal
// decomposition, so directions the neighbours do not span get no slope) and
// returns its value there. Linear functions are reproduced exactly; smooth ones
// with second-order error in the spacing of the measurements. The result is
// clamped to the range of the neighbours' values, so it never extrapolates a
// trend beyond what was measured.
#pragma once

#include <vector>

#include <Eigen/Dense>

namespace strata {

class LogInterpolator {
 public:
  LogInterpolator() = default;
  // coords: one row per measured point (log2 coordinates); values: one per row.
  // Throws InternalError when the sizes disagree or there are no points.
  LogInterpolator(Eigen::MatrixXd coords, Eigen::VectorXd values);

  // Interpolated value at x (same dimension as the coordinates).
  double evaluate(const Eigen::VectorXd& x) const;

  Eigen::Index size() const { return coords_.rows(); }
  bool empty() const { return coords_.rows() == 0; }

 private:
  Eigen::MatrixXd coords_;
  Eigen::VectorXd values_;
};

}  // namespace strata
