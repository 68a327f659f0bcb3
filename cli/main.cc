// strata: which parallel plan is fastest on this cluster, and does it fit?
// Parses the command line and maps errors to exit codes: 0 success, 2 bad input,
// 1 internal failure.
#include <cstdio>
#include <exception>
#include <iostream>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "core/log.h"

int main(int argc, char** argv) {
  CLI::App app{"strata: which parallel plan is fastest on this cluster, and does it fit?"};
  app.require_subcommand(1);
  int verbosity = 0;
  bool quiet = false;
  app.add_flag("-v,--verbose", verbosity, "more log output (repeat for more)");
  app.add_flag("-q,--quiet", quiet, "errors only");
  app.set_version_flag("--version", "strata 0.1.0");
  app.parse_complete_callback([&] { strata::init_logging(quiet ? -1 : verbosity); });

  strata::cli::add_memory_command(app);
  strata::cli::add_topo_command(app);
  strata::cli::add_calibrate_command(app, argc, argv);
  strata::cli::add_simulate_command(app);
  strata::cli::add_sweep_command(app);
  strata::cli::add_validate_command(app);
  strata::cli::add_export_command(app, argc, argv);
  strata::cli::add_run_command(app);
  strata::cli::add_import_command(app);
  strata::cli::add_goodput_command(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return strata::kExitBadInput;
  } catch (const strata::OutputError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return strata::kExitOutputFailed;
  } catch (const strata::InputError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return strata::kExitBadInput;
  } catch (const strata::InternalError& e) {
    std::fprintf(stderr, "internal error: %s\n", e.what());
    return strata::kExitInternal;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "internal error: %s\n", e.what());
    return strata::kExitInternal;
  }
  return strata::kExitOk;
}
