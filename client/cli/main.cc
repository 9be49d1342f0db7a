// tessel: the command-line interface. This file only parses and dispatches to the commands (one
// Command class in its own <command>.cc each, listed by AllCommands(); see CONTRIBUTING.md). See
// DESIGN.md "CLI contract": every command takes --json and then prints exactly one JSON object on
// stdout; errors are one "tessel: error: ..." line on stderr and a non-zero exit (1 for failures, 2
// for bad usage). Progress goes to stderr.
//
// With --server the CLI is a client; without it, tune/lookup/jobs/workers open an embedded server
// on --db (no network port) and, for tune, run worker threads in-process.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "client/cli/command.h"
#include "client/cli/common.h"
#include "schema/process.h"
#include "schema/strings.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace tessel::cli {
namespace {

int Main(int argc, char** argv) {
  // Library logs (embedded server and workers) go to stderr, warnings and up only: spdlog's
  // default logger writes to stdout, where a warning would break the one JSON object of --json.
  // NO_COLOR (https://no-color.org): no colour escapes at all, even on a terminal.
  const char* no_color = std::getenv("NO_COLOR");
  spdlog::set_default_logger(no_color != nullptr && no_color[0] != '\0'
                                 ? spdlog::stderr_logger_mt("tessel")
                                 : spdlog::stderr_color_mt("tessel"));
  spdlog::set_level(spdlog::level::warn);

  CLI::App app{"tessel: autotuning of ML kernel schedules on a simulated accelerator"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "help for every command");
  app.set_version_flag("--version", "tessel " TESSEL_VERSION);
  app.footer(
      "\nExamples:\n"
      "  tessel tune matmul --shape M=4096,N=4096,K=4096 --budget 200\n"
      "  tessel lookup matmul --shape M=4096,N=4096,K=4096\n"
      "  tessel simulate matmul --shape M=2048,N=2048,K=2048 --trace t.json\n"
      "Run 'tessel COMMAND --help' for a command's options.");

  const std::vector<std::unique_ptr<Command>> commands = AllCommands();
  for (const std::unique_ptr<Command>& command : commands) command->Add(app);

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
  for (const std::unique_ptr<Command>& command : commands) {
    if (command->Chosen()) status = command->Run(exit_code);
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
  tessel::KeepFreedHeapMemory();  // embedded tunes evaluate programs in this process
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
