// `tessel export` and `tessel import`.
#ifndef TESSEL_CLIENT_CLI_EXPORT_H_
#define TESSEL_CLIENT_CLI_EXPORT_H_

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "client/snapshot.h"
#include "schema/tessel.pb.h"

namespace tessel::cli {

struct ExportArgs {
  std::string server;
  std::string db;
  std::string from_snapshot;        // read this snapshot file instead of a db or server
  std::string format = "snapshot";  // snapshot | json | header
  std::string out;
  std::vector<std::string> kernels;
  int64_t snapshot_id = 0;
  bool json = false;
};

struct ImportArgs {
  std::string file;
  std::string server;
  std::string db;
  bool json = false;
};

// Adds the export and import subcommands to `app`; returns them for dispatch.
CLI::App* AddExportCommand(CLI::App& app, ExportArgs& args);
CLI::App* AddImportCommand(CLI::App& app, ImportArgs& args);
absl::Status RunExport(const ExportArgs& args);
absl::Status RunImport(const ImportArgs& args);

// The export as deterministic JSON text (sorted, versioned), and back.
std::string ExportToJson(const tessel::v1::ExportResponse& contents);
absl::StatusOr<tessel::v1::ExportResponse> ExportFromJson(const std::string& text);
// A C++17 header with the export as constexpr tables plus a constexpr BestConfig() that falls
// back to the kernel's default config.
std::string ExportToHeader(const tessel::v1::ExportResponse& contents);

}  // namespace tessel::cli

#endif  // TESSEL_CLIENT_CLI_EXPORT_H_
