// Calculon's inputs read as Strata's: `strata import calculon`.
//
// Calculon (calculon-ai/calculon, Isaev et al., SC'23) describes a run with three
// JSON files: an application (the model), an execution (the plan) and a system
// (one processor and its networks). This reads them as strictly as Calculon does
// (its Execution asserts the exact key set; the same asserts are made here, named
// by the Calculon key), and writes the model.json, plan.json and cluster.json a
// user would have written by hand from docs/importers.md, with a note for each
// Calculon setting that Strata models another way or not at all.
//
// The processor and the node are not copied from Calculon's numbers: Calculon's
// per-size efficiency tables are its own calibration, and Strata's costs come
// from a device profile and a node preset with their sources. The importer picks
// the shipped profile whose datasheet peak matches the system's matrix rate and
// the shipped node preset whose NVLink rate matches the system's first network,
// or the ones the caller names; a system that matches none is refused, naming
// the candidates.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace strata::importers {

// calculon/llm/llm.py, Llm.Application.
struct CalculonApplication {
  std::string name;  // the file's stem ("gpt3-175B")
  int hidden = 0, feedforward = 0, seq_size = 0, attn_heads = 0, attn_size = 0, num_blocks = 0;
};

// calculon/llm/llm.py, Llm.Execution (every key; the ones Strata does not carry
// are kept to be named in the notes).
struct CalculonExecution {
  std::string name;
  int num_procs = 0, tensor_par = 0, pipeline_par = 0, data_par = 0;
  int tensor_par_net = 0, pipeline_par_net = 0, data_par_net = 0;
  int batch_size = 0, microbatch_size = 0;
  std::string datatype, attention_type, activation_recompute, tensor_par_comm_type, tensor_par_overlap;
  int pipeline_interleaving = 1;
  bool fused_activation = false, optimizer_sharding = false, seq_par_ag_redo = false, data_par_overlap = false;
  bool weight_offload = false, activations_offload = false, optimizer_offload = false, training = true;
};

// calculon/network.py, Network.
struct CalculonNetwork {
  double bandwidth_gbytes_per_s = 0.0, efficiency = 0.0, latency_s = 0.0;
  int size = 0;
};

// calculon/system.py, System: what the import uses of it.
struct CalculonSystem {
  std::string name;
  std::vector<std::pair<std::string, double>> matrix_tflops;  // datatype -> peak TFLOP/s
  double mem1_gib = 0.0;
  std::vector<CalculonNetwork> networks;
};

// Each reader throws InputError naming the file, the JSON path and what is
// allowed; name is the file's stem, used to name the imported files' contents.
CalculonApplication read_calculon_application(const nlohmann::json& doc, const std::string& file,
                                              const std::string& name);
CalculonExecution read_calculon_execution(const nlohmann::json& doc, const std::string& file,
                                          const std::string& name);
CalculonSystem read_calculon_system(const nlohmann::json& doc, const std::string& file, const std::string& name);

// Where each of the three came from, for the errors and the files' sources.
struct CalculonFiles {
  std::string application, execution, system;
};

// The caller's overrides: a profile or node preset name, or empty to match.
struct CalculonChoices {
  std::string profile;
  std::string node;
};

struct ImportedScenario {
  nlohmann::ordered_json model, plan, cluster;  // each reads with Strata's loaders as written
  std::string profile, node;                    // what was matched (or chosen)
  std::vector<std::string> notes;               // a Calculon setting not carried, and why
};

// The three read together. Throws InputError (naming the Calculon file and key)
// for what Calculon itself refuses, for what Strata cannot express (inference,
// 8-bit types, more processors than the networks hold), and for a system no
// shipped profile or node preset matches.
ImportedScenario import_calculon(const CalculonApplication& application, const CalculonExecution& execution,
                                 const CalculonSystem& system, const CalculonFiles& files,
                                 const CalculonChoices& choices);

}  // namespace strata::importers
