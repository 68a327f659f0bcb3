#include "runtime/executor/run_config.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/json_reader.h"

namespace strata::rt {

AdamParams adam_params(const RunTraining& t) {
  AdamParams a;
  a.lr = static_cast<float>(t.lr);
  a.beta1 = static_cast<float>(t.adam_beta1);
  a.beta2 = static_cast<float>(t.adam_beta2);
  a.eps = static_cast<float>(t.adam_eps);
  a.weight_decay = static_cast<float>(t.weight_decay);
  return a;
}

RunConfig read_run_config(const nlohmann::json& doc, const std::string& file) {
  const RunSpec spec = read_run_spec(doc, file);
  RunConfig c;
  c.file = file;
  c.model = spec.model;
  c.plan = spec.plan;
  c.training = spec.training;
  c.backend = *parse_backend(spec.backend);
  c.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(spec.timeout_s * 1000.0));
  c.cpu_threads = spec.cpu_threads;
  c.gpus_per_node = spec.gpus_per_node;
  c.rank_map = spec.rank_map;
  c.prediction = spec.prediction;
  c.profile = spec.profile;

  // What this runtime cannot run, said up front rather than half-way.
  if (const std::optional<RunRefusal> refusal = run_refusal(c.model, c.plan)) {
    throw InputError(file, refusal->json_path, refusal->message);
  }
  if (c.plan.offload_optimizer) {
    throw InputError(file, "$.training.offload_optimizer",
                     "strata run keeps the optimizer on the device; optimizer offload is costed by "
                     "`strata simulate` and exported for DeepSpeed, but not run here: set it to false");
  }
  if (c.plan.cp > 1 && c.plan.cp_comm_type == CpCommType::kA2a) {
    throw InputError(file, "$.parallel.cp_comm_type",
                     "strata run runs context parallelism with \"p2p\" (the K/V ring) or \"allgather\"; "
                     "\"a2a\" (Ulysses' head exchange) is costed by `strata simulate` and run by Megatron-LM "
                     "from megatron-args.sh, not here");
  }
  if (c.model.vocab_size % c.plan.tp != 0) {
    throw InputError(file, "$.model.vocab_size",
                     fmt::format("vocab_size {} must be divisible by tensor_model_parallel_size {} "
                                 "(the vocabulary-parallel embedding splits it evenly; Megatron pads it "
                                 "to a multiple of 128 * tp)",
                                 c.model.vocab_size, c.plan.tp));
  }
  const std::int64_t tokens =
      static_cast<std::int64_t>(c.model.seq_length / c.plan.cp) * c.plan.micro_batch_size;
  if (c.plan.sequence_parallel && tokens % c.plan.tp != 0) {
    throw InputError(file, "$.parallel.sequence_parallel",
                     fmt::format("sequence parallelism splits a rank's {} tokens of a micro-batch "
                                 "(seq_length / cp * micro_batch_size) over tensor_model_parallel_size {}: "
                                 "they must divide evenly",
                                 tokens, c.plan.tp));
  }
  return c;
}

RunConfig load_run_config(const std::string& path) {
  return read_run_config(json::parse_file(path), path);
}

}  // namespace strata::rt
