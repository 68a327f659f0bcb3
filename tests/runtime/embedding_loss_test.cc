// Vocab-parallel embedding and cross-entropy (Megatron's VocabParallelEmbedding
// and vocab_parallel_cross_entropy) on every backend: whole-vocabulary results
// against double loops, and two vocabulary shards combined on the host (max,
// then sums, as the TP all-reduces would) against the whole.
#include <algorithm>
#include <cmath>

#include "kernel_test_util.h"

namespace strata::rt::testing {
namespace {

using EmbeddingLossTest = KernelTest;

TEST_P(EmbeddingLossTest, EmbeddingLookupAndGradientWithRepeatedIds) {
  const std::int64_t vocab = 11, h = 37;
  const std::vector<std::int32_t> ids = {3, 0, 10, 3, 7, 3, 1};  // id 3 three times
  const std::int64_t tokens = static_cast<std::int64_t>(ids.size());
  auto table = random_values(vocab * h, 70, -1.0f, 1.0f, stored());
  auto dout = random_values(tokens * h, 71, -1.0f, 1.0f, stored());
  std::vector<double> out, dtable(vocab * h, 0.5);
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::int64_t c = 0; c < h; ++c) {
      out.push_back(table[ids[t] * h + c]);
      dtable[ids[t] * h + c] += dout[t * h + c];
    }
  }
  Tensor ttable = tensor(table), tdout = tensor(dout), tout = zeros(tokens * h, GetParam().dtype);
  Tensor tdtable = tensor_of(DType::kFp32, std::vector<float>(vocab * h, 0.5f));
  IndexTensor tids = indices(ids);
  dev().embedding_forward(tids.view(), ttable.view(), vocab, h, 0, tout.view());
  dev().embedding_backward(tids.view(), tdout.view(), vocab, h, 0, tdtable.view());
  EXPECT_TRUE(all_close(get(tout), out, 0.0));  // a lookup is a copy
  EXPECT_TRUE(all_close(get(tdtable), dtable, tolerance(DType::kFp32)));
}

TEST_P(EmbeddingLossTest, EmbeddingShardGivesZerosOutsideItsRows) {
  // Shard [4, 8) of a vocabulary of 11: ids outside it give zero rows, which the
  // TP all-reduce fills in from the other shards.
  const std::int64_t h = 5, start = 4, rows = 4;
  const std::vector<std::int32_t> ids = {3, 4, 7, 8, 5};
  auto shard = random_values(rows * h, 72, -1.0f, 1.0f, stored());
  std::vector<double> out;
  for (std::int32_t id : ids) {
    for (std::int64_t c = 0; c < h; ++c) {
      const bool mine = id >= start && id < start + rows;
      out.push_back(mine ? shard[(id - start) * h + c] : 0.0);
    }
  }
  Tensor tshard = tensor(shard), tout = zeros(5 * h, GetParam().dtype);
  IndexTensor tids = indices(ids);
  dev().embedding_forward(tids.view(), tshard.view(), rows, h, start, tout.view());
  EXPECT_TRUE(all_close(get(tout), out, 0.0));
  Tensor dtable = zeros(rows * h, DType::kFp32);
  Tensor ones = tensor(std::vector<float>(5 * h, 1.0f));
  dev().embedding_backward(tids.view(), ones.view(), rows, h, start, dtable.view());
  std::vector<double> want(rows * h, 0.0);
  for (std::int64_t c = 0; c < h; ++c) {
    want[0 * h + c] = 1.0;  // id 4
    want[3 * h + c] = 1.0;  // id 7
    want[1 * h + c] = 1.0;  // id 5
  }
  EXPECT_TRUE(all_close(get(dtable), want, 0.0));
}

struct CrossEntropyRef {
  std::vector<double> loss, dlogits;
};

CrossEntropyRef cross_entropy_ref(const std::vector<float>& logits,
                                  const std::vector<std::int32_t>& labels, std::int64_t vocab,
                                  double grad_scale) {
  CrossEntropyRef r;
  const std::int64_t tokens = static_cast<std::int64_t>(labels.size());
  for (std::int64_t t = 0; t < tokens; ++t) {
    double mx = -1e300, total = 0.0;
    for (std::int64_t j = 0; j < vocab; ++j) mx = std::max(mx, double(logits[t * vocab + j]));
    for (std::int64_t j = 0; j < vocab; ++j) total += std::exp(logits[t * vocab + j] - mx);
    r.loss.push_back(std::log(total) + mx - logits[t * vocab + labels[t]]);
    for (std::int64_t j = 0; j < vocab; ++j) {
      const double p = std::exp(logits[t * vocab + j] - mx) / total;
      r.dlogits.push_back(grad_scale * (p - (j == labels[t] ? 1.0 : 0.0)));
    }
  }
  return r;
}

TEST_P(EmbeddingLossTest, CrossEntropyLossAndGradient) {
  const std::int64_t tokens = 6, vocab = 1000;
  const std::vector<std::int32_t> labels = {0, 999, 500, 3, 3, 777};
  auto logits = random_values(tokens * vocab, 73, -8.0f, 8.0f, stored());
  const double grad_scale = 1.0 / tokens;  // mean over tokens
  const auto ref = cross_entropy_ref(logits, labels, vocab, grad_scale);
  Tensor tl = tensor(logits), dl = zeros(tokens * vocab, GetParam().dtype);
  Tensor mx = zeros(tokens, DType::kFp32), se = zeros(tokens, DType::kFp32);
  Tensor tgt = zeros(tokens, DType::kFp32), loss = zeros(tokens, DType::kFp32);
  IndexTensor tlab = indices(labels);
  cross_entropy_forward(dev(), tl.view(), tlab.view(), tokens, vocab, mx.view(), se.view(),
                        tgt.view(), loss.view());
  dev().cross_entropy_backward(tl.view(), tlab.view(), mx.view(), se.view(), tokens, vocab, 0,
                               static_cast<float>(grad_scale), dl.view());
  EXPECT_TRUE(all_close(get(loss), ref.loss, tolerance(DType::kFp32) * 10));
  EXPECT_TRUE(all_close(get(dl), ref.dlogits, tol()));
}

TEST_P(EmbeddingLossTest, VocabShardsCombineToTheWholeLoss) {
  const std::int64_t tokens = 4, vocab = 64, half = vocab / 2;
  const std::vector<std::int32_t> labels = {5, 40, 31, 32};  // both shards, and their border
  auto logits = random_values(tokens * vocab, 74, -5.0f, 5.0f, stored());
  const auto ref = cross_entropy_ref(logits, labels, vocab, 1.0);
  IndexTensor tlab = indices(labels);
  std::vector<Tensor> shards;
  std::vector<std::vector<float>> maxes, sums, targets;
  for (int s = 0; s < 2; ++s) {
    std::vector<float> part;
    for (std::int64_t t = 0; t < tokens; ++t) {
      part.insert(part.end(), logits.begin() + t * vocab + s * half,
                  logits.begin() + t * vocab + (s + 1) * half);
    }
    shards.push_back(tensor(part));
  }
  // Step 1 on each shard, then the all-reduce(max) done on the host.
  std::vector<float> global_max(tokens, -1e30f);
  for (int s = 0; s < 2; ++s) {
    Tensor mx = zeros(tokens, DType::kFp32);
    dev().cross_entropy_row_max(shards[s].view(), tokens, half, mx.view());
    const auto m = get(mx);
    for (std::int64_t t = 0; t < tokens; ++t) global_max[t] = std::max(global_max[t], m[t]);
  }
  // Step 2 with the global max, then the all-reduce(sum) of both partials.
  Tensor gmax = tensor_of(DType::kFp32, global_max);
  std::vector<float> sum_exp(tokens, 0.0f), target(tokens, 0.0f);
  for (int s = 0; s < 2; ++s) {
    Tensor se = zeros(tokens, DType::kFp32), tg = zeros(tokens, DType::kFp32);
    dev().cross_entropy_partials(shards[s].view(), tlab.view(), tokens, half, s * half,
                                 gmax.view(), se.view(), tg.view());
    const auto a = get(se), b = get(tg);
    for (std::int64_t t = 0; t < tokens; ++t) {
      sum_exp[t] += a[t];
      target[t] += b[t];
    }
  }
  Tensor tse = tensor_of(DType::kFp32, sum_exp), ttg = tensor_of(DType::kFp32, target);
  Tensor loss = zeros(tokens, DType::kFp32);
  dev().cross_entropy_loss(gmax.view(), tse.view(), ttg.view(), tokens, loss.view());
  EXPECT_TRUE(all_close(get(loss), ref.loss, tolerance(DType::kFp32) * 10));
  // Each shard's gradient is its columns of the whole gradient.
  for (int s = 0; s < 2; ++s) {
    Tensor dl = zeros(tokens * half, GetParam().dtype);
    dev().cross_entropy_backward(shards[s].view(), tlab.view(), gmax.view(), tse.view(), tokens,
                                 half, s * half, 1.0f, dl.view());
    std::vector<double> want;
    for (std::int64_t t = 0; t < tokens; ++t) {
      want.insert(want.end(), ref.dlogits.begin() + t * vocab + s * half,
                  ref.dlogits.begin() + t * vocab + (s + 1) * half);
    }
    EXPECT_TRUE(all_close(get(dl), want, tol())) << "shard " << s;
  }
}

TEST_P(EmbeddingLossTest, CrossEntropyGradientMatchesFiniteDifferences) {
  if (stored() != DType::kFp32) GTEST_SKIP() << "finite differences need fp32 forward values";
  const std::int64_t tokens = 3, vocab = 17;
  const std::vector<std::int32_t> labels = {2, 16, 0};
  auto logits = random_values(tokens * vocab, 75, -3.0f, 3.0f, stored());
  IndexTensor tlab = indices(labels);
  Tensor mx = zeros(tokens, DType::kFp32), se = zeros(tokens, DType::kFp32);
  Tensor tg = zeros(tokens, DType::kFp32), loss = zeros(tokens, DType::kFp32);
  auto total_loss = [&](const std::vector<float>& xs) {
    Tensor t = tensor(xs);
    cross_entropy_forward(dev(), t.view(), tlab.view(), tokens, vocab, mx.view(), se.view(),
                          tg.view(), loss.view());
    double l = 0.0;
    for (float v : get(loss)) l += v;
    return l;
  };
  total_loss(logits);
  Tensor tl = tensor(logits), dl = zeros(tokens * vocab, DType::kFp32);
  dev().cross_entropy_backward(tl.view(), tlab.view(), mx.view(), se.view(), tokens, vocab, 0,
                               1.0f, dl.view());
  EXPECT_LT(finite_difference_error(total_loss, logits, get(dl), 1e-2, 5), 2e-3);
}

TEST_P(EmbeddingLossTest, UniformLogitsGiveLogVocab) {
  // Equal logits: the loss is log(V) for every label (the loss of a uniform guess).
  const std::int64_t tokens = 2, vocab = 50;
  Tensor tl = tensor(std::vector<float>(tokens * vocab, 0.5f));
  IndexTensor tlab = indices({7, 49});
  Tensor mx = zeros(tokens, DType::kFp32), se = zeros(tokens, DType::kFp32);
  Tensor tg = zeros(tokens, DType::kFp32), loss = zeros(tokens, DType::kFp32);
  cross_entropy_forward(dev(), tl.view(), tlab.view(), tokens, vocab, mx.view(), se.view(),
                        tg.view(), loss.view());
  EXPECT_TRUE(all_close(get(loss), {std::log(50.0), std::log(50.0)}, 1e-6));
}

INSTANTIATE_TEST_SUITE_P(Backends, EmbeddingLossTest, ::testing::ValuesIn(all_cases()), case_name);

}  // namespace
}  // namespace strata::rt::testing
