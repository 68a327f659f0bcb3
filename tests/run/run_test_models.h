// Run configs for the executor tests, on the small models of test_models.h
// (gpt_small, llama_small).
#pragma once

#include <string>

#include "runtime/executor/run_config.h"
#include "test_models.h"

namespace strata::testing {

// A run config for a plan (dp resolved by the caller), fp32, on the cpu backend.
inline rt::RunConfig test_config(const ModelSpec& model, const PlanSpec& plan, int steps) {
  rt::RunConfig c;
  c.model = model;
  c.plan = plan;
  c.plan.dtype = DType::kFp32;
  c.training.steps = steps;
  c.training.timing_warmup_steps = 0;
  c.training.seed = 7;
  c.training.lr = 1e-2;
  // Adam divides by sqrt(v) + eps, so an element whose gradient is near zero
  // moves by up to lr * (gradient error) / eps: with Megatron's eps 1e-8, fp32
  // rounding of a sum taken in another order (1e-10) moved single elements by
  // 3e-5 after 3 steps (llama_tp2_sp_selective), at the tolerance. eps 1e-6
  // bounds that amplification 100 times lower (worst seen: 2.6e-6) while real
  // errors, which change gradients by far more than rounding, still show.
  c.training.adam_eps = 1e-6;
  c.timeout = std::chrono::seconds(60);
  c.cpu_threads = 1;
  c.file = "test-run.json";
  return c;
}

}  // namespace strata::testing
