// Option structs and flag helpers that several `tessel` commands share. A command's own options
// live in its <command>.h; what sits here is used by more than one command.
#ifndef TESSEL_CLIENT_CLI_OPTIONS_H_
#define TESSEL_CLIENT_CLI_OPTIONS_H_

#include <string>

#include "CLI/CLI.hpp"
#include "client/cli/common.h"

namespace tessel::cli {

// Where a command finds its server: --server HOST:PORT, or an embedded server on --db (the two
// exclude each other). `db` keeps its default (shown in --help) unless --db is given.
struct ServerArgs {
  std::string server;
  std::string db = kDefaultDb;
};

// Adds --server and --db to `command`, filling `server` and `db`.
inline void AddServerOptions(CLI::App* command, std::string& server, std::string& db) {
  auto* server_opt = command->add_option("--server", server, "tessel server address HOST:PORT");
  auto* db_opt = command->add_option("--db", db, "SQLite database of the embedded server")
                     ->capture_default_str();
  server_opt->excludes(db_opt);
}
inline void AddServerOptions(CLI::App* command, ServerArgs& args) {
  AddServerOptions(command, args.server, args.db);
}

// The options of the listing commands (`jobs`, `workers`).
struct ListArgs {
  ServerArgs backend;
  int limit = 0;  // at most this many; 0 = the server's default
  bool json = false;
};

// A command whose only option is --json (`kernels`, `targets`).
struct JsonOnlyArgs {
  bool json = false;
};

}  // namespace tessel::cli

#endif  // TESSEL_CLIENT_CLI_OPTIONS_H_
