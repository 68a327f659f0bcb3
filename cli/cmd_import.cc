// strata import calculon: Calculon's application, execution and system files
// written as Strata's model.json, plan.json and cluster.json (importers/calculon.h),
// checked together as `strata simulate` would read them before any is written.
#include <filesystem>

#include <fmt/format.h>

#include "cli/commands.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_reader.h"
#include "importers/calculon.h"
#include "sim/scenario.h"

namespace strata::cli {
namespace {

struct ImportArgs {
  std::string application, execution, system;
  std::string profile, node;
  std::string out_dir;
};

std::string stem(const std::string& path) { return std::filesystem::path(path).stem().string(); }

// The imported files read as the scenario loader reads them; errors name the
// file the import would write and the Calculon file it came from.
Scenario check_imported(const importers::ImportedScenario& imported, const ImportArgs& args) {
  auto label = [&](const char* name, const std::string& from) {
    return fmt::format("{}/{} (imported from {})", args.out_dir, name, from);
  };
  Scenario s;
  s.model_file = label("model.json", args.application);
  s.plan_file = label("plan.json", args.execution);
  s.cluster_file = label("cluster.json", args.system);
  s.model = read_model_spec(imported.model, s.model_file);
  s.cluster = read_cluster_spec(imported.cluster, s.cluster_file);
  s.profile = load_scenario_profile(s.cluster, s.cluster_file, "");
  read_scenario_plan(s, imported.plan, s.plan_file, "$", false);
  return s;
}

void print_summary(const Scenario& s, const importers::ImportedScenario& imported, const ImportArgs& args) {
  const ModelSpec& m = s.model;
  const PlanSpec& p = s.plan;
  fmt::print("imported Calculon's {} on {} ({} processors) to {}/\n", m.name, stem(args.system), s.cluster.num_gpus(),
             args.out_dir);
  fmt::print("  model.json    {}: {} layers, hidden {}, {} heads, ffn {}, seq {}, vocab {}\n", m.name, m.num_layers,
             m.hidden_size, m.num_attention_heads, m.ffn_hidden_size, m.seq_length, m.vocab_size);
  fmt::print("  plan.json     tp {} pp {} dp {}{} ({}), micro-batch {}, global batch {}, {}, recompute {}{}{}\n", p.tp,
             p.pp, p.dp, p.vpp > 1 ? fmt::format(" vpp {}", p.vpp) : "", to_string(p.schedule), p.micro_batch_size,
             p.global_batch_size, to_string(p.dtype), to_string(p.recompute),
             p.sequence_parallel ? ", sequence parallel" : "",
             p.zero_stage > 0 ? fmt::format(", ZeRO-{}", p.zero_stage) : "");
  fmt::print("  cluster.json  {} node{} of {} ({} GPUs), profile {}{}\n", s.cluster.nodes,
             s.cluster.nodes == 1 ? "" : "s", imported.node, s.cluster.gpus_per_node, imported.profile,
             s.cluster.nodes > 1 ? fmt::format(", {} x {:g} Gb/s per node", s.cluster.fabric.nics_per_node,
                                               s.cluster.fabric.nic_gbps)
                                 : "");
  fmt::print("what Strata takes another way ({}):\n", imported.notes.size());
  for (const std::string& n : imported.notes) fmt::print("  - {}\n", n);
  try {
    require_simulated_model(s);
    fmt::print("next: strata simulate --model {0}/model.json --plan {0}/plan.json --cluster {0}/cluster.json --out {0}/sim\n",
               args.out_dir);
  } catch (const InputError& e) {
    fmt::print("note: {}\n", e.message());
    fmt::print("next: strata memory --model {0}/model.json --plan {0}/plan.json --cluster {0}/cluster.json\n",
               args.out_dir);
  }
}

void run_import_calculon(const ImportArgs& args) {
  const auto application = importers::read_calculon_application(json::parse_file(args.application),
                                                                 args.application, stem(args.application));
  const auto execution =
      importers::read_calculon_execution(json::parse_file(args.execution), args.execution, stem(args.execution));
  const auto system = importers::read_calculon_system(json::parse_file(args.system), args.system, stem(args.system));
  const importers::ImportedScenario imported = importers::import_calculon(
      application, execution, system, {args.application, args.execution, args.system}, {args.profile, args.node});
  const Scenario s = check_imported(imported, args);

  OutputSet out;
  out.add(args.out_dir + "/model.json", imported.model.dump(2) + "\n");
  out.add(args.out_dir + "/plan.json", imported.plan.dump(2) + "\n");
  out.add(args.out_dir + "/cluster.json", imported.cluster.dump(2) + "\n");
  out.commit();
  print_summary(s, imported, args);
}

}  // namespace

void add_import_command(CLI::App& app) {
  CLI::App* import = app.add_subcommand("import", "Another planner's inputs as Strata's model, plan and cluster");
  import->require_subcommand(1);
  auto args = std::make_shared<ImportArgs>();
  CLI::App* calculon = import->add_subcommand(
      "calculon", "Calculon's application, execution and system JSON as model.json, plan.json and cluster.json "
                  "(docs/importers.md)");
  calculon->add_option("--application", args->application, "Calculon application (model) JSON")->required();
  calculon->add_option("--execution", args->execution, "Calculon execution (plan) JSON")->required();
  calculon->add_option("--system", args->system, "Calculon system JSON")->required();
  calculon->add_option("--out", args->out_dir, "directory for model.json, plan.json and cluster.json")->required();
  calculon->add_option("--profile", args->profile,
                       "device profile to cost the processor with (default: the shipped one whose peak matches)");
  calculon->add_option("--node", args->node,
                       "node preset for the first network (default: the shipped one whose NVLink rate matches)");
  calculon->callback([args] { run_import_calculon(*args); });
}

}  // namespace strata::cli
