// strata-run.json: what to_json writes, read_run_spec reads back field for field,
// and writing what was read gives the same bytes; a bad file is an error at the
// JSON path at fault.
#include "plan/run_spec.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace strata {
namespace {

ModelSpec model() {
  ModelSpec m;
  m.name = "round-trip";
  m.num_layers = 8;
  m.hidden_size = 64;
  m.num_attention_heads = 8;
  m.num_query_groups = 2;
  m.ffn_hidden_size = 256;
  m.seq_length = 32;
  m.vocab_size = 128;
  m.swiglu = true;
  m.normalization = Normalization::kRmsNorm;
  m.untie_embeddings_and_output_weights = true;
  m.position_embedding_type = PositionEmbedding::kRope;
  m.add_bias_linear = false;
  return m;
}

// Every key away from its default, so a field the reader drops shows.
RunSpec spec() {
  RunSpec s;
  s.source = "strata export --model round-trip";
  s.model = model();
  PlanSpec& p = s.plan;
  p.tp = 2;
  p.pp = 2;
  p.dp = 2;
  p.vpp = 2;
  p.schedule = Schedule::kInterleaved;
  p.sequence_parallel = true;
  p.micro_batch_size = 2;
  p.global_batch_size = 16;
  p.zero_stage = 2;
  p.recompute = Recompute::kFull;
  p.dtype = DType::kFp16;
  p.accumulate_allreduce_grads_in_fp32 = true;
  p.overlap_grad_reduce = false;
  p.overlap_param_gather = false;
  p.flash_attention = false;
  p.ddp_bucket_size = 12345;
  EXPECT_TRUE(parse_rank_order("tp-cp-ep-pp-dp", p.rank_order));
  s.training = {.steps = 7, .timing_warmup_steps = 3, .seed = 99, .lr = 3e-4, .weight_decay = 0.1,
                .adam_beta1 = 0.8, .adam_beta2 = 0.95, .adam_eps = 1e-6};
  s.backend = "cuda";
  s.timeout_s = 45.5;
  s.cpu_threads = 3;
  s.cluster_name = "two-nodes";
  s.nodes = 2;
  s.gpus_per_node = 4;
  s.rank_map = rank_placements(p, 4);
  // Echoed objects keep their values; a document read is a nlohmann::json, whose
  // keys are sorted, so these are written in that order.
  s.prediction = {{"fits", true}, {"step_time_s", 1.25}};
  s.profile = {{"file", "<repo>/calib/profiles/h100-sxm5-80gb.json"}, {"name", "h100"}};
  return s;
}

RunSpec read_back(const nlohmann::ordered_json& j) {
  return read_run_spec(nlohmann::json::parse(j.dump()), "strata-run.json");
}

TEST(RunSpec, EveryFieldSurvivesWriteAndRead) {
  const RunSpec a = spec();
  const RunSpec b = read_back(to_json(a));
  EXPECT_EQ(b.source, a.source);
  EXPECT_EQ(to_json(b.model).dump(), to_json(a.model).dump());
  EXPECT_EQ(to_json(b.plan).dump(), to_json(a.plan).dump());
  EXPECT_EQ(b.training, a.training);
  EXPECT_EQ(b.backend, "cuda");
  EXPECT_EQ(b.timeout_s, 45.5);
  EXPECT_EQ(b.cpu_threads, 3);
  EXPECT_EQ(b.cluster_name, "two-nodes");
  EXPECT_EQ(b.nodes, 2);
  EXPECT_EQ(b.gpus_per_node, 4);
  EXPECT_EQ(b.rank_map, a.rank_map);
  EXPECT_EQ(b.prediction, a.prediction);
  EXPECT_EQ(b.profile, a.profile);
  // Writing what was read gives the same document, byte for byte.
  EXPECT_EQ(to_json(b).dump(2), to_json(a).dump(2));
}

TEST(RunSpec, RankMapFollowsTheRankOrderOnTheNodes) {
  const RunSpec s = spec();  // tp-cp-ep-pp-dp: tp fastest, then pp, then dp
  ASSERT_EQ(s.rank_map.size(), 8u);
  const RankPlacement five = s.rank_map[5];  // tp 1 + 2 * (pp 0 + 2 * dp 1)
  EXPECT_EQ(five, (RankPlacement{.rank = 5, .node = 1, .local_rank = 1, .tp_rank = 1, .dp_rank = 1, .pp_rank = 0}));
}

void expect_error(nlohmann::json doc, const std::string& path, const std::string& fragment) {
  try {
    read_run_spec(doc, "strata-run.json");
    ADD_FAILURE() << "no error for " << path;
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), path) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(RunSpec, BadValuesAreErrorsAtTheirPath) {
  const nlohmann::json good = nlohmann::json::parse(to_json(spec()).dump());
  nlohmann::json d = good;
  d["schema"] = "strata-run/0";
  expect_error(d, "$.schema", "strata-run/1");
  d = good;
  d["training"]["adam_beta2"] = 1.5;
  expect_error(d, "$.training.adam_beta2", "");
  d = good;
  d["runtime"]["backend"] = "tpu";
  expect_error(d, "$.runtime.backend", "cuda");
  d = good;
  d["rank_map"][5]["pp_rank"] = 1;
  expect_error(d, "$.rank_map[5]", "rank order tp-cp-ep-pp-dp");
  d = good;
  d["training"]["weight_decay_typo"] = 0.1;
  expect_error(d, "$.training.weight_decay_typo", "");
}

}  // namespace
}  // namespace strata
