// tessel: the command-line interface. This file only wires the commands (one <command>.{h,cc}
// each, see CONTRIBUTING.md) to CLI11. See DESIGN.md "CLI contract": every command takes --json and
// then prints exactly one JSON object on stdout; errors are one "tessel: error: ..." line on stderr
// and a non-zero exit (1 for failures, 2 for bad usage). Progress goes to stderr.
//
// With --server the CLI is a client; without it, tune/lookup/jobs/workers open an embedded server
// on --db (no network port) and, for tune, run worker threads in-process.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "client/cli/common.h"
#include "client/cli/export.h"
#include "client/cli/jobs.h"
#include "client/cli/kernels.h"
#include "client/cli/lookup.h"
#include "client/cli/options.h"
#include "client/cli/replay.h"
#include "client/cli/retune.h"
#include "client/cli/simulate.h"
#include "client/cli/space.h"
#include "client/cli/targets.h"
#include "client/cli/tune.h"
#include "client/cli/watch.h"
#include "client/cli/workers.h"
#include "schema/strings.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace tessel::cli {
namespace {

int Main(int argc, char** argv) {
  // Library logs (embedded server and workers) go to stderr, warnings and up only: spdlog's
  // default logger writes to stdout, where a warning would break the one JSON object of --json.
  spdlog::set_default_logger(spdlog::stderr_color_mt("tessel"));
  spdlog::set_level(spdlog::level::warn);

  CLI::App app{"tessel: autotuning of ML kernel schedules on a simulated accelerator"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "help for every command");

  // The order here is the order of `tessel --help`.
  TuneArgs tune;
  CLI::App* tune_cmd = AddTuneCommand(app, tune);
  WatchArgs watch;
  CLI::App* watch_cmd = AddWatchCommand(app, watch);
  LookupArgs lookup;
  CLI::App* lookup_cmd = AddLookupCommand(app, lookup);
  ListArgs jobs;
  CLI::App* jobs_cmd = AddJobsCommand(app, jobs);
  ListArgs workers;
  CLI::App* workers_cmd = AddWorkersCommand(app, workers);
  JsonOnlyArgs kernels_args;
  CLI::App* kernels_cmd = AddKernelsCommand(app, kernels_args);
  JsonOnlyArgs targets_args;
  CLI::App* targets_cmd = AddTargetsCommand(app, targets_args);
  ExportArgs export_args;
  CLI::App* export_cmd = AddExportCommand(app, export_args);
  ImportArgs import_args;
  CLI::App* import_cmd = AddImportCommand(app, import_args);
  RetuneArgs retune_args;
  CLI::App* retune_cmd = AddRetuneCommand(app, retune_args);
  SimulateArgs simulate;
  CLI::App* simulate_cmd = AddSimulateCommand(app, simulate);
  ReplayArgs replay;
  CLI::App* replay_cmd = AddReplayCommand(app, replay);
  SpaceArgs space;
  CLI::App* space_cmd = AddSpaceCommand(app, space);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    if (argc > 1 && argv[1][0] != '-' && app.get_subcommands().empty()) {
      std::vector<std::string> names;
      for (const CLI::App* command : app.get_subcommands({})) names.push_back(command->get_name());
      std::fprintf(stderr, "tessel: error: unknown command '%s' (commands: %s)\n", argv[1],
                   StrJoin(names, ", ").c_str());
      return kExitUsage;
    }
    std::fprintf(stderr, "tessel: error: %s\nrun 'tessel --help' for usage\n", e.what());
    return kExitUsage;
  }

  int exit_code = 0;
  absl::Status status;
  if (*tune_cmd) {
    status = RunTune(tune, exit_code);
  } else if (*watch_cmd) {
    status = RunWatch(watch, exit_code);
  } else if (*lookup_cmd) {
    status = RunLookup(lookup);
  } else if (*jobs_cmd) {
    status = RunJobs(jobs);
  } else if (*workers_cmd) {
    status = RunWorkers(workers);
  } else if (*kernels_cmd) {
    status = RunKernels(kernels_args);
  } else if (*targets_cmd) {
    status = RunTargets(targets_args);
  } else if (*export_cmd) {
    status = RunExport(export_args);
  } else if (*import_cmd) {
    status = RunImport(import_args);
  } else if (*retune_cmd) {
    status = RunRetune(retune_args, exit_code);
  } else if (*simulate_cmd) {
    status = RunSimulate(simulate);
  } else if (*replay_cmd) {
    status = RunReplay(replay);
  } else if (*space_cmd) {
    status = RunSpace(space);
  }
  if (!status.ok()) {
    std::fprintf(stderr, "tessel: error: %s\n", std::string(status.message()).c_str());
    return kExitFailure;
  }
  return exit_code;
}

}  // namespace
}  // namespace tessel::cli

int main(int argc, char** argv) {
  try {
    return tessel::cli::Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessel: error: %s\n", e.what());
    return 1;
  } catch (...) {
    std::fprintf(stderr, "tessel: error: unexpected failure\n");
    return 1;
  }
}
