// The subcommands of `strata`. Each add_*_command registers its options on the
// app and a callback that does the work by calling the libraries.
#pragma once

#include <CLI/CLI.hpp>

namespace strata::cli {

void add_memory_command(CLI::App& app);
// strata topo show (cmd_topo.cc).
void add_topo_command(CLI::App& app);
// strata calibrate (cmd_calibrate.cc); argc/argv: the whole command line, for
// the profile's provenance.
void add_calibrate_command(CLI::App& app, int argc, char** argv);
// strata simulate (cmd_simulate.cc).
void add_simulate_command(CLI::App& app);
// strata sweep (cmd_sweep.cc).
void add_sweep_command(CLI::App& app);
// strata validate (cmd_validate.cc).
void add_validate_command(CLI::App& app);
// strata export (cmd_export.cc); argc/argv: the command line, recorded in strata-run.json.
void add_export_command(CLI::App& app, int argc, char** argv);
// strata run (cmd_run.cc).
void add_run_command(CLI::App& app);
// strata import calculon (cmd_import.cc).
void add_import_command(CLI::App& app);
// strata goodput: time to train with failures and checkpoints.
void add_goodput_command(CLI::App& app);

}  // namespace strata::cli
