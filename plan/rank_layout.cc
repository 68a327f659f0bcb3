#include "plan/rank_layout.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "plan/plan_spec.h"

namespace strata {
namespace {

constexpr std::array<const char*, kNumParallelDims> kDimNames{"tp", "cp", "ep", "dp", "pp"};

int index(ParallelDim dim) { return static_cast<int>(dim); }

// The dimension a group of this kind spans (kModel and kEmbedding span several).
ParallelDim spanned(GroupKind kind) {
  switch (kind) {
    case GroupKind::kTensor: return ParallelDim::kTp;
    case GroupKind::kContext: return ParallelDim::kCp;
    case GroupKind::kData: return ParallelDim::kDp;
    case GroupKind::kExpert: return ParallelDim::kEp;
    default: return ParallelDim::kPp;
  }
}

}  // namespace

const char* to_string(ParallelDim dim) { return kDimNames[index(dim)]; }

bool parse_rank_order(const std::string& text, RankOrder& out) {
  RankOrder order;
  std::array<bool, kNumParallelDims> seen{};
  std::size_t begin = 0;
  for (int k = 0; k < kNumParallelDims; ++k) {
    const std::size_t end = std::min(text.find('-', begin), text.size());
    const std::string token = text.substr(begin, end - begin);
    const auto it = std::find(kDimNames.begin(), kDimNames.end(), token);
    if (it == kDimNames.end()) return false;
    const int d = static_cast<int>(it - kDimNames.begin());
    if (seen[d]) return false;
    seen[d] = true;
    order.fastest_first[k] = static_cast<ParallelDim>(d);
    if (k + 1 < kNumParallelDims && end == text.size()) return false;
    begin = end + 1;
  }
  if (begin <= text.size()) return false;  // trailing text after the fifth name
  out = order;
  return true;
}

std::string to_string(const RankOrder& order) {
  std::string s;
  for (ParallelDim d : order.fastest_first) {
    if (!s.empty()) s += '-';
    s += to_string(d);
  }
  return s;
}

int& RankCoord::operator[](ParallelDim dim) {
  switch (dim) {
    case ParallelDim::kTp: return tp;
    case ParallelDim::kCp: return cp;
    case ParallelDim::kEp: return ep;
    case ParallelDim::kDp: return dp;
    case ParallelDim::kPp: return pp;
  }
  return tp;
}

int RankCoord::operator[](ParallelDim dim) const { return const_cast<RankCoord&>(*this)[dim]; }

const char* to_string(GroupKind kind) {
  switch (kind) {
    case GroupKind::kTensor: return "tensor";
    case GroupKind::kContext: return "context";
    case GroupKind::kData: return "data";
    case GroupKind::kPipeline: return "pipeline";
    case GroupKind::kModel: return "model";
    case GroupKind::kEmbedding: return "embedding";
    case GroupKind::kExpert: return "expert";
  }
  return "tensor";
}

RankLayout::RankLayout(const Sizes& sizes, const RankOrder& order) : order_(order) {
  size_ = {sizes.tp, sizes.cp, sizes.ep, sizes.dp, sizes.pp};
  for (int s : size_) {
    if (s < 1) {
      throw InternalError(fmt::format("rank layout sizes tp={} cp={} ep={} dp={} pp={} must all be >= 1",
                                      sizes.tp, sizes.cp, sizes.ep, sizes.dp, sizes.pp));
    }
  }
  int stride = 1;
  for (ParallelDim d : order_.fastest_first) {
    stride_[index(d)] = stride;
    stride *= size_[index(d)];
  }
  world_ = stride;
}

namespace {
RankLayout::Sizes sizes_of(const PlanSpec& plan) {
  if (plan.dp < 1) throw InternalError("RankLayout: the plan's dp is not resolved (call resolve_and_check_plan)");
  RankLayout::Sizes s;
  s.tp = plan.tp;
  s.cp = plan.cp;
  s.dp = plan.dp;
  s.pp = plan.pp;
  return s;
}
}  // namespace

RankLayout::RankLayout(const PlanSpec& plan) : RankLayout(sizes_of(plan), plan.rank_order) {}

RankLayout expert_rank_layout(const PlanSpec& plan) {
  if (plan.moe.etp < 1) throw InternalError("expert_rank_layout: the plan's etp is not resolved (check_moe_plan)");
  RankLayout::Sizes s = sizes_of(plan);
  s.tp = plan.moe.etp;
  s.cp = 1;
  s.ep = plan.moe.ep;
  s.dp = plan.expert_data_parallel();
  return RankLayout(s, plan.rank_order);
}

RankCoord RankLayout::coord(int rank) const {
  if (rank < 0 || rank >= world_) {
    throw InternalError(fmt::format("rank {} is outside [0, {}) of layout {}", rank, world_, to_string(order_)));
  }
  RankCoord c;
  for (int d = 0; d < kNumParallelDims; ++d) c[static_cast<ParallelDim>(d)] = rank / stride_[d] % size_[d];
  return c;
}

int RankLayout::rank(const RankCoord& c) const {
  int r = 0;
  for (int d = 0; d < kNumParallelDims; ++d) {
    const int v = c[static_cast<ParallelDim>(d)];
    if (v < 0 || v >= size_[d]) {
      throw InternalError(fmt::format("coordinate (tp {}, cp {}, ep {}, dp {}, pp {}) is outside tp={} cp={} "
                                      "ep={} dp={} pp={}",
                                      c.tp, c.cp, c.ep, c.dp, c.pp, size_[0], size_[1], size_[2], size_[3],
                                      size_[4]));
    }
    r += v * stride_[d];
  }
  return r;
}

std::vector<int> RankLayout::group(GroupKind kind, int rank) const {
  const RankCoord c = coord(rank);
  std::vector<int> members;
  switch (kind) {
    case GroupKind::kTensor:
    case GroupKind::kContext:
    case GroupKind::kData:
    case GroupKind::kExpert:
    case GroupKind::kPipeline: {
      const ParallelDim dim = spanned(kind);
      RankCoord m = c;
      for (int v = 0; v < size(dim); ++v) {
        m[dim] = v;
        members.push_back(this->rank(m));
      }
      break;
    }
    case GroupKind::kModel: {
      RankCoord m = c;
      for (int p = 0; p < size(ParallelDim::kPp); ++p) {
        for (int x = 0; x < size(ParallelDim::kCp); ++x) {
          for (int t = 0; t < size(ParallelDim::kTp); ++t) {
            m.pp = p;
            m.cp = x;
            m.tp = t;
            members.push_back(this->rank(m));
          }
        }
      }
      std::sort(members.begin(), members.end());
      break;
    }
    case GroupKind::kEmbedding: {
      const int last = size(ParallelDim::kPp) - 1;
      if (c.pp != 0 && c.pp != last) break;
      RankCoord m = c;
      m.pp = 0;
      members.push_back(this->rank(m));
      if (last > 0) {
        m.pp = last;
        members.push_back(this->rank(m));
      }
      break;
    }
  }
  return members;
}

std::vector<std::vector<int>> RankLayout::all_groups(GroupKind kind) const {
  std::vector<std::vector<int>> groups;
  for (int r = 0; r < world_; ++r) {
    std::vector<int> members = group(kind, r);
    // Each group once: from the rank that leads it.
    if (!members.empty() && members.front() == r) groups.push_back(std::move(members));
  }
  std::sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) { return a.front() < b.front(); });
  return groups;
}

int RankLayout::pipeline_prev(int rank) const {
  RankCoord c = coord(rank);
  if (c.pp == 0) return -1;
  --c.pp;
  return this->rank(c);
}

int RankLayout::pipeline_next(int rank) const {
  RankCoord c = coord(rank);
  if (c.pp == size(ParallelDim::kPp) - 1) return -1;
  ++c.pp;
  return this->rank(c);
}

}  // namespace strata
