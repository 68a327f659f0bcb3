// Time as a function of size (bytes) for collectives, memory-bound kernels and
// host copies.
//
// An alpha-beta line t = alpha + bytes / beta is fitted to all measured points
// by least squares on relative error. Inside the measured range the curve is
// that line times a correction interpolated piecewise-linearly in log space
// between neighbouring measurements (log(t / line) over log bytes): it passes
// through every measurement and follows the bends real curves have at
// eager/rendezvous protocol limits and cache sizes, which one straight line
// cannot, while between two points it keeps the line's shape (a piecewise
// log-log segment alone is off by 6% at the knee of a line sampled 4x apart).
// Outside the range the line extrapolates, scaled by the end measurement's
// correction so the curve stays continuous.
#pragma once

#include <vector>

#include "costmodel/cost_sections.h"

namespace strata {

struct AlphaBeta {
  double alpha_s = 0.0;
  double beta_bytes_per_s = 0.0;
  double seconds(double bytes) const { return alpha_s + bytes / beta_bytes_per_s; }
};

// Fits t = alpha + bytes / beta minimising sum(((alpha + bytes/beta) - t_i) / t_i)^2
// (Eigen least squares), with alpha >= 0 and beta > 0 enforced by refitting the
// other parameter alone. Needs at least two points with different sizes;
// throws InternalError otherwise.
AlphaBeta fit_alpha_beta(const std::vector<SizePoint>& points);

// A curve built from measured points with its alpha-beta line fitted.
// points: strictly increasing bytes, at least two. Throws InternalError otherwise.
SizeCurveData make_size_curve(std::vector<SizePoint> points);

// Time of `bytes` on the curve (see the file comment). bytes <= 0 gives the
// extrapolated fixed cost.
double curve_seconds(const SizeCurveData& curve, double bytes);

}  // namespace strata
