#include "client/cli/command.h"

namespace tessel::cli {

void Command::Add(CLI::App& app) {
  subcommand_ = app.add_subcommand(name_, description_);
  AddOptions(*subcommand_);
  subcommand_->add_flag("--json", json_, "print one JSON object");
  // After the footer a command may have set (tune's effort table).
  subcommand_->footer(subcommand_->get_footer() + "\nExample:\n  " + example_);
}

std::vector<std::unique_ptr<Command>> AllCommands() {
  std::vector<std::unique_ptr<Command>> commands;
  for (auto* make :
       {NewTuneCommand,    NewTuneModelCommand, NewWatchCommand,    NewCancelCommand,
        NewLookupCommand,  NewJobsCommand,      NewTrialsCommand,   NewReportCommand,
        NewWorkersCommand, NewKernelsCommand,   NewTargetsCommand,  NewExportCommand,
        NewImportCommand,  NewRetuneCommand,    NewSimulateCommand, NewExplainCommand,
        NewReplayCommand,  NewSpaceCommand,     NewAdminCommand,    NewHealthCommand}) {
    commands.push_back(make());
  }
  return commands;
}

}  // namespace tessel::cli
