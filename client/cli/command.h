// A `tessel` subcommand, and the list of them. Each command is one class in its own <command>.cc
// (CONTRIBUTING.md); main.cc only parses and dispatches. DESIGN.md "CLI contract": every command
// takes --json and then prints exactly one JSON object on stdout; errors are one
// "tessel: error: ..." line on stderr and a non-zero exit.
#ifndef TESSEL_CLIENT_CLI_COMMAND_H_
#define TESSEL_CLIENT_CLI_COMMAND_H_

#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"

namespace tessel::cli {

class Command {
 public:
  virtual ~Command() = default;
  Command(const Command&) = delete;
  Command& operator=(const Command&) = delete;

  // Adds the subcommand to `app` with its own options and the --json flag that every command
  // takes; parsing fills this object's fields. Call once; `app` must outlive this object's use.
  void Add(CLI::App& app);
  // True when the command line named this command (after parsing).
  bool Chosen() const { return subcommand_ != nullptr && static_cast<bool>(*subcommand_); }
  // Runs the parsed command. An error becomes one "tessel: error:" line and exit code 1. A
  // command whose outcome is neither a success nor an error (a job that ended without
  // completing) sets `exit_code` instead.
  virtual absl::Status Run(int& exit_code) = 0;

 protected:
  // `example`: one command line, shown under "Example:" in the command's --help.
  Command(std::string name, std::string description, std::string example)
      : name_(std::move(name)),
        description_(std::move(description)),
        example_(std::move(example)) {}
  // Adds the command's own options (not --json) to `command`, bound to the subclass's fields.
  // A command with no options of its own keeps this empty default.
  virtual void AddOptions(CLI::App& /*command*/) {}

  bool json_ = false;  // --json: print one JSON object

 private:
  const std::string name_;
  const std::string description_;
  const std::string example_;
  CLI::App* subcommand_ = nullptr;
};

// Every command, in the order of `tessel --help`.
std::vector<std::unique_ptr<Command>> AllCommands();

// The factories behind AllCommands(), one per <command>.cc.
std::unique_ptr<Command> NewTuneCommand(), NewTuneModelCommand(), NewWatchCommand(),
    NewCancelCommand(), NewLookupCommand(), NewJobsCommand(), NewWorkersCommand(),
    NewKernelsCommand(), NewTargetsCommand(), NewExportCommand(), NewImportCommand(),
    NewRetuneCommand(), NewSimulateCommand(), NewReplayCommand(), NewSpaceCommand(),
    NewAdminCommand(), NewHealthCommand(), NewTrialsCommand(), NewExplainCommand(),
    NewReportCommand();

}  // namespace tessel::cli

#endif  // TESSEL_CLIENT_CLI_COMMAND_H_
