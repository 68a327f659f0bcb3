// strata export: every Megatron-LM flag and DeepSpeed key against the plan it
// came from, the plans DeepSpeed cannot express, plans that do not fit, sweeps,
// and byte-identical output.
#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include <gtest/gtest.h>

#include "cli_test_util.h"
#include "core/data_paths.h"
#include "core/error.h"
#include "core/json_reader.h"
#include "export/export.h"
#include "plan/params.h"
#include "plan/run_spec.h"
#include "runtime/executor/run_config.h"
#include "sim/device_memory.h"
#include "sim/simulate.h"

namespace strata::sim {
namespace {

using strata::testing::TempDir;

Scenario scenario(const TempDir& dir, const std::string& model, const std::string& plan_json,
                  const std::string& cluster) {
  ScenarioArgs args;
  args.model = model;
  args.plan = dir.write("plan.json", plan_json);
  args.cluster = cluster;
  return load_scenario(args);
}

SimulationResult folded(const Scenario& s) {
  SimulationOptions o;
  o.fidelity = Fidelity::kFolded;
  return simulate(s, o);
}

const ExportFile& file(const ExportResult& r, const std::string& name) {
  for (const ExportFile& f : r.files) {
    if (f.name == name) return f;
  }
  throw std::runtime_error("no file " + name);
}

bool has_file(const ExportResult& r, const std::string& name) {
  for (const ExportFile& f : r.files) {
    if (f.name == name) return true;
  }
  return false;
}

// The flags in megatron-args.sh's argument arrays: "  --flag [value]" lines.
std::multimap<std::string, std::string> script_flags(const std::string& script) {
  std::multimap<std::string, std::string> out;
  std::istringstream in(script);
  bool in_array = false;
  for (std::string line; std::getline(in, line);) {
    if (line.size() > 6 && line.compare(line.size() - 2, 2, "=(") == 0) {
      in_array = true;
      continue;
    }
    if (line == ")") {
      in_array = false;
      continue;
    }
    if (!in_array) continue;
    std::istringstream words(line);
    std::string flag, value;
    words >> flag >> value;
    out.emplace(flag, value);
  }
  return out;
}

void expect_flag(const std::multimap<std::string, std::string>& flags, const std::string& flag,
                 const std::string& value) {
  auto it = flags.find(flag);
  ASSERT_NE(it, flags.end()) << flag << " missing";
  EXPECT_EQ(it->second, value) << flag;
  EXPECT_EQ(flags.count(flag), 1u) << flag << " repeated";
}

void expect_absent(const std::multimap<std::string, std::string>& flags, const std::string& flag) {
  EXPECT_EQ(flags.count(flag), 0u) << flag << " should not be there";
}

// Llama 3 8B, tp 2, pp 2, vpp 4 (interleaved), ZeRO-1, selective recompute,
// sequence parallel, bf16, on one DGX H100 (dp 2).
TEST(Export, MegatronFlagsFollowTheLlamaPlan) {
  TempDir dir;
  const Scenario s = scenario(dir, "llama3-8b",
                              R"({"tp": 2, "pp": 2, "vpp": 4, "schedule": "interleaved-1f1b", "micro_batch_size": 1,
                                  "global_batch_size": 64, "zero_stage": 1, "recompute": "selective",
                                  "sequence_parallel": true, "flash_attention": true})",
                              "dgx-h100-1node");
  ExportOptions o;
  o.training.steps = 20;
  const ExportResult r = export_plan(s, folded(s), o);
  const auto flags = script_flags(file(r, "megatron-args.sh").content);
  const ModelSpec& m = s.model;
  expect_flag(flags, "--num-layers", std::to_string(m.num_layers));          // 32
  expect_flag(flags, "--hidden-size", std::to_string(m.hidden_size));        // 4096
  expect_flag(flags, "--num-attention-heads", std::to_string(m.num_attention_heads));
  expect_flag(flags, "--group-query-attention", "");
  expect_flag(flags, "--num-query-groups", "8");
  expect_flag(flags, "--ffn-hidden-size", "14336");
  expect_flag(flags, "--swiglu", "");
  expect_flag(flags, "--normalization", "RMSNorm");
  expect_flag(flags, "--seq-length", "8192");
  expect_flag(flags, "--max-position-embeddings", "8192");
  expect_flag(flags, "--position-embedding-type", "rope");
  expect_flag(flags, "--untie-embeddings-and-output-weights", "");
  expect_flag(flags, "--disable-bias-linear", "");
  expect_flag(flags, "--attention-backend", "flash");
  expect_flag(flags, "--tensor-model-parallel-size", "2");
  expect_flag(flags, "--pipeline-model-parallel-size", "2");
  // 32 layers / (pp 2 * vpp 4) = 4 layers per virtual stage.
  expect_flag(flags, "--num-layers-per-virtual-pipeline-stage", "4");
  expect_flag(flags, "--sequence-parallel", "");
  expect_flag(flags, "--use-distributed-optimizer", "");
  expect_absent(flags, "--use-megatron-fsdp");
  expect_flag(flags, "--overlap-grad-reduce", "");
  expect_flag(flags, "--overlap-param-gather", "");
  expect_flag(flags, "--micro-batch-size", "1");
  expect_flag(flags, "--global-batch-size", "64");
  expect_flag(flags, "--recompute-granularity", "selective");
  expect_absent(flags, "--recompute-method");
  expect_flag(flags, "--bf16", "");
  expect_absent(flags, "--fp16");
  expect_flag(flags, "--accumulate-allreduce-grads-in-fp32", "");  // the plan's default with bf16
  expect_flag(flags, "--train-iters", "20");
  expect_flag(flags, "--vocab-size", std::to_string(m.vocab_size));
  // tp 2: DeepSpeed needs Megatron-DeepSpeed's model code, so no deepspeed.json, and why.
  EXPECT_FALSE(has_file(r, "deepspeed.json"));
  ASSERT_FALSE(r.notes.empty());
  EXPECT_NE(r.notes[0].find("tp 2"), std::string::npos) << r.notes[0];
}

// GPT-3 175B's published plan shape at small scale: full recompute, fp16, no
// GQA, learned positions, biases, tied embeddings, ZeRO-3, GPipe.
TEST(Export, MegatronFlagsFollowTheGptPlan) {
  TempDir dir;
  const Scenario s = scenario(dir, "gpt-tiny",
                              R"({"tp": 1, "pp": 2, "micro_batch_size": 2, "global_batch_size": 16, "schedule": "gpipe",
                                  "zero_stage": 3, "recompute": "full", "dtype": "fp16", "overlap_param_gather": false})",
                              "dgx-a100-1node");
  const ExportResult r = export_plan(s, folded(s), {});
  const auto flags = script_flags(file(r, "megatron-args.sh").content);
  expect_flag(flags, "--num-layers", "4");
  expect_flag(flags, "--hidden-size", "256");
  expect_flag(flags, "--num-attention-heads", "8");
  expect_absent(flags, "--group-query-attention");
  expect_absent(flags, "--num-query-groups");
  expect_flag(flags, "--ffn-hidden-size", "1024");  // 4h by default
  expect_absent(flags, "--swiglu");
  expect_flag(flags, "--normalization", "LayerNorm");
  expect_flag(flags, "--position-embedding-type", "learned_absolute");
  expect_absent(flags, "--untie-embeddings-and-output-weights");
  expect_absent(flags, "--disable-bias-linear");
  expect_flag(flags, "--hidden-dropout", "0.1");
  expect_flag(flags, "--attention-backend", "unfused");
  expect_flag(flags, "--pipeline-model-parallel-size", "2");
  expect_absent(flags, "--num-layers-per-virtual-pipeline-stage");
  expect_absent(flags, "--sequence-parallel");
  // ZeRO-3 as Megatron-FSDP's optim_grads_params.
  expect_flag(flags, "--use-distributed-optimizer", "");
  expect_flag(flags, "--use-megatron-fsdp", "");
  expect_flag(flags, "--data-parallel-sharding-strategy", "optim_grads_params");
  expect_absent(flags, "--overlap-param-gather");
  expect_flag(flags, "--recompute-granularity", "full");
  expect_flag(flags, "--recompute-method", "uniform");
  expect_flag(flags, "--recompute-num-layers", "1");
  expect_flag(flags, "--fp16", "");
  expect_absent(flags, "--bf16");
  expect_absent(flags, "--accumulate-allreduce-grads-in-fp32");  // fp16: 2-byte gradients by default
  expect_flag(flags, "--micro-batch-size", "2");
  expect_flag(flags, "--global-batch-size", "16");
  // GPipe has no Megatron form: said, and ZeRO-3 with pp 2 has no DeepSpeed form.
  bool gpipe_note = false;
  for (const std::string& n : r.notes) gpipe_note = gpipe_note || n.find("GPipe") != std::string::npos;
  EXPECT_TRUE(gpipe_note);
  EXPECT_FALSE(has_file(r, "deepspeed.json"));
  EXPECT_NE(r.notes[0].find("ZeRO-3 with pp 2"), std::string::npos) << r.notes[0];
}

// A plan whose framework overlaps tensor-parallel collectives with GEMMs (NeMo's
// userbuffers) launches with --tp-comm-overlap, which Megatron-LM allows only with
// sequence parallelism; Megatron-Core's own default does not overlap.
// torchtitan's op-level selective recompute has no Megatron flag: none is
// written and a note says so; strata-run.json carries it, which strata run refuses.
TEST(Export, SelectiveOpRecomputeIsNotAMegatronFlag) {
  TempDir dir;
  const Scenario s = scenario(dir, "gpt-tiny",
                              R"({"tp": 2, "pp": 1, "micro_batch_size": 1, "global_batch_size": 8,
                                  "recompute": "selective_op", "flash_attention": true})",
                              "dgx-h100-1node");
  const ExportResult r = export_plan(s, folded(s), {});
  const std::string& args = file(r, "megatron-args.sh").content;
  expect_absent(script_flags(args), "--recompute-granularity");
  EXPECT_NE(args.find("# note: recompute selective_op is torchtitan's op-level policy"), std::string::npos);
  const std::string& config = file(r, "strata-run.json").content;
  EXPECT_NE(config.find(R"("recompute_granularity": "selective_op")"), std::string::npos);
  try {
    read_run_spec(nlohmann::json::parse(config), "strata-run.json");
    FAIL() << "strata run has no op-level selective recompute";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "$.training.recompute_granularity");
  }
}

TEST(Export, TpCommOverlapFollowsTheFramework) {
  TempDir dir;
  const auto flags_for = [&](const std::string& framework, bool sp) {
    const Scenario s = scenario(dir, "gpt-tiny",
                                R"({"tp": 2, "pp": 1, "micro_batch_size": 1, "global_batch_size": 8, "framework": ")" +
                                    framework + R"(", "sequence_parallel": )" + (sp ? "true" : "false") + "}",
                                "dgx-h100-1node");
    return script_flags(file(export_plan(s, folded(s), {}), "megatron-args.sh").content);
  };
  expect_flag(flags_for("nemo-2024", true), "--tp-comm-overlap", "");
  expect_absent(flags_for("nemo-2024", false), "--tp-comm-overlap");
  expect_absent(flags_for("megatron-core", true), "--tp-comm-overlap");
}

TEST(Export, DeepSpeedConfigFollowsTheDataParallelPlan) {
  TempDir dir;
  // dp 8 on one node, ZeRO-2 with optimizer offload, bf16: B 64 = b 2 x m 4 x dp 8.
  const Scenario s = scenario(dir, "llama3-8b",
                              R"({"tp": 1, "pp": 1, "micro_batch_size": 2, "global_batch_size": 64, "zero_stage": 2,
                                  "offload_optimizer": true, "overlap_grad_reduce": false})",
                              "dgx-h100-1node");
  ExportOptions o;
  o.training.lr = 3e-4;
  o.force = true;  // an 8B model on H100s with ZeRO-2: whether it fits is not the point here
  const ExportResult r = export_plan(s, folded(s), o);
  const nlohmann::json ds = nlohmann::json::parse(file(r, "deepspeed.json").content);
  EXPECT_EQ(ds["train_batch_size"], 64);
  EXPECT_EQ(ds["train_micro_batch_size_per_gpu"], 2);
  EXPECT_EQ(ds["gradient_accumulation_steps"], 4);
  EXPECT_EQ(ds["zero_optimization"]["stage"], 2);
  EXPECT_EQ(ds["zero_optimization"]["overlap_comm"], false);
  EXPECT_EQ(ds["zero_optimization"]["offload_optimizer"]["device"], "cpu");
  EXPECT_EQ(ds["zero_optimization"]["reduce_bucket_size"], 40000000);
  EXPECT_EQ(ds["bf16"]["enabled"], true);
  EXPECT_EQ(ds["fp16"]["enabled"], false);
  EXPECT_EQ(ds["optimizer"]["type"], "AdamW");
  EXPECT_DOUBLE_EQ(ds["optimizer"]["params"]["lr"].get<double>(), 3e-4);
  EXPECT_EQ(ds["gradient_clipping"], 0.0);
  // The same plan in Megatron's words: ZeRO-2 is Megatron-FSDP's optim_grads.
  const auto flags = script_flags(file(r, "megatron-args.sh").content);
  expect_flag(flags, "--data-parallel-sharding-strategy", "optim_grads");
  expect_flag(flags, "--optimizer-cpu-offload", "");
  expect_absent(flags, "--overlap-grad-reduce");
}

TEST(Export, DeepSpeedUnsupportedPlansSayWhy) {
  PlanSpec p;
  p.tp = 4;
  EXPECT_NE(deepspeed_unsupported(p)->find("Megatron-DeepSpeed"), std::string::npos);
  p.tp = 1;
  p.pp = 2;
  p.zero_stage = 2;
  EXPECT_NE(deepspeed_unsupported(p)->find("stages 0 and 1"), std::string::npos);
  p.zero_stage = 1;
  p.schedule = Schedule::kGpipe;
  EXPECT_NE(deepspeed_unsupported(p)->find("TrainSchedule"), std::string::npos);
  p.schedule = Schedule::kOneFOneB;
  EXPECT_FALSE(deepspeed_unsupported(p).has_value());
  p.cp = 2;  // Megatron's context parallelism is not DeepSpeed-Ulysses
  EXPECT_NE(deepspeed_unsupported(p)->find("Ulysses"), std::string::npos);
}

// Hybrid sharding on eight DGX H100 nodes (dp 64, shards within a node): Megatron
// gets eight distributed-optimizer instances, DeepSpeed MiCS groups of 8 at ZeRO-3
// (it has no hybrid ZeRO-1/2), and strata-run.json carries the key for strata run.
TEST(Export, HybridShardingMapsToEachFramework) {
  TempDir dir;
  auto exported = [&](int zero_stage) {
    const Scenario s = scenario(dir, "llama3-8b",
                                R"({"tp": 1, "pp": 1, "micro_batch_size": 1, "global_batch_size": 64, "zero_stage": )" +
                                    std::to_string(zero_stage) + R"(, "zero_shard_size": 8, "flash_attention": true})",
                                "dgx-h100-8node");
    ExportOptions o;
    o.force = true;
    return export_plan(s, folded(s), o);
  };
  const ExportResult z3 = exported(3);
  expect_flag(script_flags(file(z3, "megatron-args.sh").content), "--num-distributed-optimizer-instances", "8");
  const nlohmann::json ds = nlohmann::json::parse(file(z3, "deepspeed.json").content);
  EXPECT_EQ(ds["zero_optimization"]["mics_shard_size"], 8);
  const std::string& config = file(z3, "strata-run.json").content;
  EXPECT_NE(config.find(R"("zero_shard_size": 8)"), std::string::npos);
  EXPECT_EQ(rt::read_run_config(nlohmann::json::parse(config), "strata-run.json").plan.zero_shard_size, 8);
  PlanSpec p;
  p.dp = 64;
  p.zero_stage = 1;
  p.zero_shard_size = 8;
  EXPECT_NE(deepspeed_unsupported(p)->find("mics_shard_size"), std::string::npos);
}

// A cp 2 plan's strata-run.json reads back (world = tp x cp x pp x dp) for strata
// run; the a2a exchange, which strata run does not run, is refused by name.
TEST(Export, ContextParallelRunConfigReadsBackAndA2aIsRefusedByName) {
  TempDir dir;
  const Scenario s = scenario(dir, "gpt-tiny",
                              R"({"tp": 2, "cp": 2, "pp": 1, "micro_batch_size": 1, "global_batch_size": 8,
                                  "flash_attention": true})",
                              "dgx-h100-1node");
  const ExportResult r = export_plan(s, folded(s), {});
  const std::string& config = file(r, "strata-run.json").content;
  const RunSpec spec = read_run_spec(nlohmann::json::parse(config), "strata-run.json");
  EXPECT_EQ(spec.plan.cp, 2);
  EXPECT_EQ(spec.plan.dp, 2);
  const rt::RunConfig c = rt::read_run_config(nlohmann::json::parse(config), "strata-run.json");
  EXPECT_EQ(c.plan.cp, 2);
  EXPECT_EQ(c.plan.cp_comm_type, CpCommType::kP2p);
  nlohmann::json a2a = nlohmann::json::parse(config);
  a2a["parallel"]["cp_comm_type"] = "a2a";
  try {
    rt::read_run_config(a2a, "strata-run.json");
    FAIL() << "strata run does not run the a2a exchange";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "$.parallel.cp_comm_type");
  }
}

// Uneven stages go out as Megatron-Core's own flags (arguments.py: with them the
// interleaving is --num-virtual-stages-per-pipeline-rank), come back from
// strata-run.json, and DeepSpeed's config, which cannot say them, is not written.
TEST(Export, UnevenStagesAreMegatronFlagsAndReadBack) {
  TempDir dir;
  const Scenario s = scenario(dir, "llama3-8b",
                              R"({"tp": 2, "pp": 4, "vpp": 2, "schedule": "interleaved-1f1b", "micro_batch_size": 1,
                                  "global_batch_size": 32, "decoder_first_pipeline_num_layers": 6,
                                  "decoder_last_pipeline_num_layers": 6, "flash_attention": true})",
                              "dgx-h100-1node");
  const ExportResult r = export_plan(s, folded(s), {});
  const auto flags = script_flags(file(r, "megatron-args.sh").content);
  expect_flag(flags, "--decoder-first-pipeline-num-layers", "6");
  expect_flag(flags, "--decoder-last-pipeline-num-layers", "6");
  expect_flag(flags, "--num-virtual-stages-per-pipeline-rank", "2");
  expect_absent(flags, "--num-layers-per-virtual-pipeline-stage");
  const RunSpec spec = read_run_spec(nlohmann::json::parse(file(r, "strata-run.json").content), "strata-run.json");
  EXPECT_EQ(spec.plan.first_stage_layers, 6);
  EXPECT_EQ(spec.plan.last_stage_layers, 6);
  for (const ExportFile& f : r.files) EXPECT_NE(f.name, "deepspeed.json");
  EXPECT_NE(deepspeed_unsupported(s.plan)->find("partition_method"), std::string::npos);

  const Scenario counted = scenario(dir, "llama3-8b",
                                    R"({"tp": 2, "pp": 2, "micro_batch_size": 1, "global_batch_size": 32,
                                        "account_for_embedding_in_pipeline_split": true,
                                        "account_for_loss_in_pipeline_split": true, "flash_attention": true})",
                                    "dgx-h100-1node");
  const auto counted_flags = script_flags(file(export_plan(counted, folded(counted), {}), "megatron-args.sh").content);
  EXPECT_EQ(counted_flags.count("--account-for-embedding-in-pipeline-split"), 1u);
  EXPECT_EQ(counted_flags.count("--account-for-loss-in-pipeline-split"), 1u);
}

// zb-v goes out as 2 virtual stages per rank: the flags sail-sg's fork needs
// with --zero-bubble-v-schedule (it asserts 2 virtual stages) and mainline
// Megatron-LM runs as interleaved 1F1B; the notes name both, and the run config
// brings the V back.
TEST(Export, ZeroBubbleVIsTwoVirtualStagesAndTheNotesNameItsSchedulers) {
  TempDir dir;
  const Scenario s = scenario(dir, "llama3-8b",
                              R"({"tp": 2, "pp": 4, "schedule": "zb-v", "micro_batch_size": 1,
                                  "global_batch_size": 30, "flash_attention": true})",
                              "dgx-h100-1node");
  EXPECT_EQ(s.plan.vpp, 2);
  const ExportResult r = export_plan(s, folded(s), {});
  const auto flags = script_flags(file(r, "megatron-args.sh").content);
  expect_flag(flags, "--num-layers-per-virtual-pipeline-stage", "4");
  std::string note;
  for (const std::string& n : r.notes) {
    if (n.find("zb-v:") != std::string::npos) note = n;
  }
  EXPECT_NE(note.find("--zero-bubble-v-schedule"), std::string::npos) << note;
  EXPECT_NE(note.find("ScheduleZBVZeroBubble"), std::string::npos) << note;
  EXPECT_NE(note.find("30 micro-batches divisible by pp 4"), std::string::npos) << note;
  const RunSpec spec = read_run_spec(nlohmann::json::parse(file(r, "strata-run.json").content), "strata-run.json");
  EXPECT_EQ(spec.plan.schedule, Schedule::kZbV);
  EXPECT_EQ(spec.plan.vpp, 2);
  for (const ExportFile& f : r.files) EXPECT_NE(f.name, "deepspeed.json");
}

TEST(Export, PlanThatDoesNotFitIsRefusedUnlessForced) {
  TempDir dir;
  // Llama 3 8B on one GPU per replica without sharding: 16 bytes per parameter
  // of model state alone is 128 GB, over an H100's 80 GB.
  const Scenario s = scenario(dir, "llama3-8b", R"({"tp": 1, "pp": 1, "micro_batch_size": 1, "global_batch_size": 8})",
                              "dgx-h100-1node");
  const SimulationResult r = folded(s);
  ASSERT_FALSE(r.memory.fits);
  try {
    export_plan(s, r, {});
    ADD_FAILURE() << "exported a plan that does not fit";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.file(), s.plan_file);
    EXPECT_NE(what.find("stage 0 needs"), std::string::npos) << what;
    EXPECT_NE(what.find("over by"), std::string::npos) << what;
    EXPECT_NE(what.find("--force"), std::string::npos) << what;
  }
  ExportOptions o;
  o.force = true;
  const ExportResult forced = export_plan(s, r, o);
  EXPECT_TRUE(has_file(forced, "strata-run.json"));
  EXPECT_NE(forced.notes.back().find("--force"), std::string::npos);
}

TEST(Export, FilesAreByteIdenticalAndScriptsLaunchEveryRank) {
  TempDir dir;
  const Scenario s = scenario(dir, "tiny", R"({"tp": 2, "pp": 2, "micro_batch_size": 1, "global_batch_size": 8})",
                              "dgx-h100-1node");
  ExportOptions o;
  const ExportResult a = export_plan(s, folded(s), o);
  const ExportResult b = export_plan(s, folded(s), o);
  ASSERT_EQ(a.files.size(), b.files.size());
  for (std::size_t i = 0; i < a.files.size(); ++i) EXPECT_EQ(a.files[i].content, b.files[i].content) << a.files[i].name;
  // dp = 8 / (2*2) = 2: 8 ranks everywhere.
  const std::string mpirun = file(a, "launch-mpirun.sh").content;
  EXPECT_NE(mpirun.find("-n 8 --oversubscribe"), std::string::npos) << mpirun;
  EXPECT_NE(mpirun.find("OMPI_ALLOW_RUN_AS_ROOT=1"), std::string::npos);
  EXPECT_NE(mpirun.find("run \"$HERE/strata-run.json\""), std::string::npos);
  const std::string slurm = file(a, "launch.slurm").content;
  EXPECT_NE(slurm.find("#SBATCH --nodes=1"), std::string::npos);
  EXPECT_NE(slurm.find("#SBATCH --ntasks-per-node=8"), std::string::npos);
  EXPECT_NE(slurm.find("#SBATCH --gpus-per-node=8"), std::string::npos);
  EXPECT_NE(slurm.find("srun --mpi=pmix --ntasks=8"), std::string::npos);
  EXPECT_TRUE(file(a, "megatron-args.sh").executable);
  // prediction.json is the simulator's result.json.
  const nlohmann::json prediction = nlohmann::json::parse(file(a, "prediction.json").content);
  EXPECT_EQ(prediction["schema"], "strata-result/1");
  EXPECT_EQ(prediction["inputs"]["plan"]["dp"], 2);
}

TEST(Export, ReadsARankedPlanFromASweep) {
  TempDir dir;
  const std::string sweep = dir.write("sweep.json", R"({
    "schema": "strata-sweep/1",
    "request": {"model": "tiny", "cluster": "dgx-h100-1node", "profile": null},
    "plans": [
      {"rank": 1, "plan": {"tp": 1, "pp": 1, "dp": 8, "micro_batch_size": 1, "global_batch_size": 8}, "result": {}},
      {"rank": 2, "plan": {"tp": 2, "pp": 1, "dp": 4, "micro_batch_size": 2, "global_batch_size": 16}, "result": {}}
    ]})");
  const Scenario s = scenario_from_sweep(sweep, 2, false);
  EXPECT_EQ(s.plan.tp, 2);
  EXPECT_EQ(s.plan.dp, 4);
  EXPECT_EQ(s.plan.micro_batch_size, 2);
  EXPECT_EQ(s.model.name, "tiny");
  EXPECT_EQ(s.profile.name, load_profile(s.cluster.profile).name);
  try {
    scenario_from_sweep(sweep, 3, false);
    ADD_FAILURE() << "rank 3 does not exist";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "$.plans");
  }
  const std::string bad = dir.write("bad-sweep.json", R"({"schema": "strata-sweep/1", "request": {"model": "tiny",
    "cluster": "dgx-h100-1node"}, "plans": [{"rank": 1, "plan": {"tp": 3, "pp": 1, "micro_batch_size": 1,
    "global_batch_size": 8}}]})");
  try {
    scenario_from_sweep(bad, 1, false);
    ADD_FAILURE() << "tp 3 is not a valid plan for tiny on 8 GPUs";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), bad);
    EXPECT_EQ(e.json_path(), "$.plans[0].plan.pp");
  }
}


namespace rules {

// The flag combinations Megatron-LM's validate_args and DeepSpeed's engine
// enforce, each mirroring the line it cites (Megatron-LM d98e8a64,
// megatron/training/arguments.py unless named; DeepSpeed edaa7221,
// deepspeed/runtime/engine.py), checked on every export of a plan matrix.
// With MEGATRON_LM_DIR set, tests/run/export_real_tools.sh runs the real parsers.
struct Exported {
  ModelSpec model;
  PlanSpec plan;
  std::multimap<std::string, std::string> flags;
  std::string script;
  std::optional<nlohmann::json> deepspeed;
};

bool has(const Exported& e, const std::string& flag) { return e.flags.count(flag) > 0; }

std::vector<Exported> export_matrix(const TempDir& dir) {
  std::vector<Exported> out;
  // The plans of tests/run/export_matrix.json, on each of its models.
  const nlohmann::json matrix = json::parse_file(data_root() + "/tests/run/export_matrix.json");
  for (const nlohmann::json& model_name : matrix["models"]) {
    const std::string model = model_name.get<std::string>();
    for (const nlohmann::json& plan_json : matrix["plans"]) {
      const std::string plan = plan_json.dump();
      const Scenario s = scenario(dir, model, plan, matrix["cluster"].get<std::string>());
      ExportOptions o;
      o.force = true;  // fitting is not what these rules are about
      const ExportResult r = export_plan(s, folded(s), o);
      Exported e;
      e.model = s.model;
      e.plan = s.plan;
      e.script = file(r, "megatron-args.sh").content;
      e.flags = script_flags(e.script);
      if (has_file(r, "deepspeed.json")) e.deepspeed = nlohmann::json::parse(file(r, "deepspeed.json").content);
      out.push_back(std::move(e));
    }
  }
  // Its MoE models and plans: megatron-args.sh alone (export_megatron_only).
  const nlohmann::json& moe = matrix["moe"];
  for (const nlohmann::json& model_name : moe["models"]) {
    for (const nlohmann::json& plan_json : moe["plans"]) {
      const Scenario s = scenario(dir, model_name.get<std::string>(), plan_json.dump(), moe["cluster"].get<std::string>());
      ExportOptions o;
      o.force = true;
      const ExportResult r = export_megatron_only(s, memory_report(s.model, s.plan, device_memory(s.profile)), o);
      Exported e;
      e.model = s.model;
      e.plan = s.plan;
      e.script = file(r, "megatron-args.sh").content;
      e.flags = script_flags(e.script);
      out.push_back(std::move(e));
    }
  }
  return out;
}

int flag_int(const Exported& e, const std::string& flag, int fallback) {
  auto it = e.flags.find(flag);
  return it == e.flags.end() ? fallback : std::stoi(it->second);
}

TEST(ExportRules, MegatronValidateArgsAcceptsEveryExport) {
  TempDir dir;
  for (const Exported& e : export_matrix(dir)) {
    const std::string plan = to_json(e.plan).dump();
    // :1024-1029 --overlap-param-gather needs the distributed optimizer (or
    // Megatron-FSDP) and --overlap-grad-reduce.
    if (has(e, "--overlap-param-gather")) {
      EXPECT_TRUE(has(e, "--overlap-grad-reduce")) << plan;
      EXPECT_TRUE(has(e, "--use-distributed-optimizer") || has(e, "--use-megatron-fsdp")) << plan;
    }
    // :1884-1888 the CPU offload runs on the precision-aware optimizer, which
    // needs the distributed optimizer (megatron/core/optimizer/__init__.py:1057).
    if (has(e, "--optimizer-cpu-offload")) {
      EXPECT_TRUE(has(e, "--use-precision-aware-optimizer")) << plan;
    }
    if (has(e, "--use-precision-aware-optimizer")) {
      EXPECT_TRUE(has(e, "--use-distributed-optimizer")) << plan;
    }
    // :1166-1170 Megatron-FSDP refuses CUDA_DEVICE_MAX_CONNECTIONS=1 and needs fsdp_dtensor checkpoints.
    const bool one_connection = e.script.find("export CUDA_DEVICE_MAX_CONNECTIONS=1") != std::string::npos;
    if (has(e, "--use-megatron-fsdp")) {
      EXPECT_FALSE(one_connection) << plan;
      expect_flag(e.flags, "--ckpt-format", "fsdp_dtensor");
    } else if (e.plan.tp > 1 || e.plan.cp > 1) {
      // :1477 before Blackwell, tp or cp > 1 without FSDP needs exactly one connection.
      EXPECT_TRUE(one_connection) << plan;
    }
    // :1441 tensor-parallel communication overlap needs sequence parallelism.
    if (has(e, "--tp-comm-overlap")) {
      EXPECT_TRUE(has(e, "--sequence-parallel")) << plan;
    }
    // :1204-1217 with --bf16 Megatron accumulates in fp32 unless --grad-reduce-in-bf16:
    // the run must reduce what the plan reduces.
    if (has(e, "--bf16")) {
      EXPECT_EQ(has(e, "--grad-reduce-in-bf16"), !e.plan.accumulate_allreduce_grads_in_fp32) << plan;
    }
    EXPECT_FALSE(has(e, "--bf16") && has(e, "--fp16")) << plan;
  }
}

// Megatron-Core's MoE rules, on the matrix's MoE exports (its world_size).
TEST(ExportRules, MegatronAcceptsEveryMoeExport) {
  TempDir dir;
  const int world = json::parse_file(data_root() + "/tests/run/export_matrix.json")["moe"]["world_size"].get<int>();
  int checked = 0;
  for (const Exported& e : export_matrix(dir)) {
    if (!has(e, "--num-experts")) {
      // arguments.py:1655-1656: expert parallelism needs experts.
      EXPECT_FALSE(has(e, "--expert-model-parallel-size")) << e.model.name;
      continue;
    }
    ++checked;
    const std::string plan = e.model.name + " " + to_json(e.plan).dump();
    const int experts = flag_int(e, "--num-experts", 0);
    const int tp = flag_int(e, "--tensor-model-parallel-size", 1);
    const int pp = flag_int(e, "--pipeline-model-parallel-size", 1);
    const int ep = flag_int(e, "--expert-model-parallel-size", 1);
    // arguments.py:587-588: etp defaults to tp when not given.
    const int etp = flag_int(e, "--expert-tensor-parallel-size", tp);
    // arguments.py:1657-1658: experts divide over ep.
    EXPECT_EQ(experts % ep, 0) << plan;
    // parallel_state.py:873-884: world_size % (etp * ep * pp) == 0.
    EXPECT_EQ(world % (etp * ep * pp), 0) << plan;
    // transformer/moe/moe_layer.py:636-640: MoE with tp > 1 trains only with sequence parallelism.
    if (tp > 1) {
      EXPECT_TRUE(has(e, "--sequence-parallel")) << plan;
    }
    // transformer_config.py:2612-2615: expert biases only with etp 1.
    if (!has(e, "--disable-bias-linear")) {
      EXPECT_EQ(etp, 1) << plan;
    }
    // transformer_config.py:1836-1860: token dropping with the aux-loss balancing kinds only.
    if (has(e, "--moe-expert-capacity-factor")) {
      const std::string lb = e.flags.find("--moe-router-load-balancing-type")->second;
      EXPECT_TRUE(lb == "aux_loss" || lb == "seq_aux_loss" || lb == "global_aux_loss" || lb == "none") << plan;
    }
    // transformer_config.py:2661-2669: top-1 softmax routing needs the softmax first.
    if (flag_int(e, "--moe-router-topk", 2) == 1) {
      EXPECT_TRUE(has(e, "--moe-router-pre-softmax")) << plan;
    }
    // gpt_layer_specs.py:647-657: an integer N (layer i is MoE when i % N == 0) or one 0/1 per layer.
    const std::string freq = e.flags.find("--moe-layer-freq")->second;
    if (freq.find('[') == std::string::npos) {
      EXPECT_EQ(freq, std::to_string(e.model.moe.moe_layer_freq)) << plan;
    } else {
      EXPECT_EQ(freq, "'([0]*3+[1]*58)'") << plan;  // the only pattern in the matrix: DeepSeek-V3's
      EXPECT_EQ(e.model.num_layers, 3 + 58) << plan;
    }
    const std::string dispatcher = e.flags.find("--moe-token-dispatcher-type")->second;
    EXPECT_TRUE(dispatcher == "alltoall" || dispatcher == "allgather" || dispatcher == "flex") << plan;
    // transformer_config.py: DeepEP is the flex dispatcher's backend, said outright.
    if (dispatcher == "flex") {
      ASSERT_TRUE(has(e, "--moe-flex-dispatcher-backend")) << plan;
      EXPECT_EQ(e.flags.find("--moe-flex-dispatcher-backend")->second, "deepep") << plan;
    }
    // transformer_config.py:2671-2686: group-limited routing names its groups, which divide the experts.
    if (has(e, "--moe-router-group-topk")) {
      const int groups = flag_int(e, "--moe-router-num-groups", 0);
      ASSERT_GT(groups, 0) << plan;
      EXPECT_EQ(experts % groups, 0) << plan;
      EXPECT_LE(flag_int(e, "--moe-router-group-topk", 0), groups) << plan;
    }
  }
  EXPECT_GE(checked, 15);
}

// megatron/core/tokenizers/utils/build_tokenizer.py:133 vocab_size_with_padding:
// Megatron pads --vocab-size to a multiple of make_vocab_size_divisible_by x tp
// (default 128); the export keeps what the prediction simulated.
TEST(ExportRules, MegatronPadsTheVocabularyToWhatWasSimulated) {
  TempDir dir;
  for (const Exported& e : export_matrix(dir)) {
    auto it = e.flags.find("--make-vocab-size-divisible-by");
    const long long divisor = it == e.flags.end() ? 128 : std::stoll(it->second);
    const long long vocab = std::stoll(e.flags.find("--vocab-size")->second);
    const long long multiple = divisor * e.plan.tp;
    const long long padded = (vocab + multiple - 1) / multiple * multiple;
    EXPECT_EQ(padded, vocab) << "tp " << e.plan.tp << " vocab " << vocab << " divisor " << divisor;
  }
  // Llama 3's 128,256 at tp 8: 128 x 8 would pad to 129,024; 96 x 8 = 768 divides it.
  ModelSpec m;
  m.vocab_size = 128256;
  PlanSpec p;
  p.tp = 8;
  const auto flags = megatron_flags(m, p, nullptr);
  auto it = std::find_if(flags.begin(), flags.end(),
                         [](const MegatronFlag& f) { return f.flag == "--make-vocab-size-divisible-by"; });
  ASSERT_NE(it, flags.end());
  EXPECT_EQ(it->value, "96");
  // A vocabulary tp does not divide: Megatron pads it to a multiple of tp, and so does the simulation.
  m.vocab_size = 50257;
  EXPECT_EQ(padded_vocab_size(m, p), 50264);
  EXPECT_EQ(vocab_rows_per_gpu(m, p), 6283);
}

// DeepSpeed v0.16 engine.py:1300-1350 _do_optimizer_sanity_check: with ZeRO any
// mix of model and gradient-accumulation dtypes; without it fp16 accumulates only
// in fp16 (1343-1344; else "unsupported mix", 1350) and bf16 only in fp32 (1347;
// bf16 in bf16 raises "Bfloat16 wrapper must use a gradient accumulation type of
// fp32", 1341-1342, unless the pipeline engine runs it, 1335-1339).
TEST(ExportRules, DeepSpeedAcceptsTheGradientAccumulationDtype) {
  TempDir dir;
  int checked = 0;
  int without_zero = 0;
  for (const Exported& e : export_matrix(dir)) {
    if (!e.deepspeed) continue;
    ++checked;
    const nlohmann::json& ds = *e.deepspeed;
    if (e.plan.dtype == DType::kFp32) {
      EXPECT_FALSE(ds.contains("data_types")) << ds.dump();
      continue;
    }
    const std::string accum = ds["data_types"]["grad_accum_dtype"];
    const std::string plans = e.plan.accumulate_allreduce_grads_in_fp32 ? "fp32" : to_string(e.plan.dtype);
    if (e.plan.zero_stage >= 1) {
      EXPECT_EQ(accum, plans) << ds.dump();
      continue;
    }
    ++without_zero;
    if (e.plan.dtype == DType::kFp16) {
      EXPECT_EQ(accum, "fp16") << ds.dump();
    } else if (e.plan.pp > 1) {
      EXPECT_EQ(accum, plans) << ds.dump();
    } else {
      EXPECT_EQ(accum, "fp32") << ds.dump();
    }
  }
  EXPECT_GE(without_zero, 3);
  EXPECT_GE(checked, 8);
}

}  // namespace rules

}  // namespace
}  // namespace strata::sim
