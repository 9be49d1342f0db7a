// `tessel export` and `tessel import`: published best configs to and from snapshot, JSON and
// header files.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "client/cli/command.h"
#include "client/cli/export_formats.h"
#include "client/cli/model_export.h"
#include "client/cli/model_file.h"
#include "client/cli/options.h"
#include "client/snapshot.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "schema/status_macros.h"
#include "schema/strings.h"

namespace tessel::cli {
namespace {

using nlohmann::json;
namespace v1 = tessel::v1;

absl::Status WriteFileAtomically(const std::string& path, const std::string& contents) {
  const std::string tmp = StrCat(path, ".tmp.", getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return absl::UnavailableError(StrCat("cannot write ", path));
    out << contents;
    if (!out.flush()) return absl::UnavailableError(StrCat("cannot write ", path));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return absl::UnavailableError(StrCat("cannot write ", path));
  }
  return absl::OkStatus();
}

bool IsSqliteFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char header[16] = {};
  in.read(header, sizeof(header));
  return in.gcount() == 16 && std::string(header, 15) == "SQLite format 3";
}

// Keeps the best configs and defaults of the kernels in `kernels` (all when empty).
v1::ExportResponse FilterKernels(const v1::ExportResponse& contents,
                                 const std::vector<std::string>& kernels) {
  if (kernels.empty()) return contents;
  auto wanted = [&](const std::string& k) {
    return std::find(kernels.begin(), kernels.end(), k) != kernels.end();
  };
  v1::ExportResponse filtered = contents;
  filtered.clear_best();
  filtered.clear_defaults();
  for (const auto& b : contents.best()) {
    if (wanted(b.kernel())) *filtered.add_best() = b;
  }
  for (const auto& d : contents.defaults()) {
    if (wanted(d.kernel())) *filtered.add_defaults() = d;
  }
  return filtered;
}

class ExportCommand final : public Command {
 public:
  ExportCommand()
      : Command("export", "write published best configs to a snapshot, JSON or C++ header file",
                "tessel export --format header --out tessel_configs.h --db tessel.db") {}

  // Writes the file atomically and prints what was written (one JSON object with --json).
  absl::Status Run(int&) override {
    if (!backend_.server.empty() + !backend_.db.empty() + !from_snapshot_.empty() > 1) {
      return absl::InvalidArgumentError("give one of --server, --db or --from-snapshot");
    }
    if (!model_.empty()) return RunModel();
    TESSEL_ASSIGN_OR_RETURN(const v1::ExportResponse contents, Contents());
    absl::Status written;
    if (format_ == "snapshot") {
      written = client::WriteSnapshot(contents, out_);
    } else if (format_ == "json") {
      written = WriteFileAtomically(out_, ExportToJson(contents));
    } else {
      written = WriteFileAtomically(out_, ExportToHeader(contents));
    }
    TESSEL_RETURN_IF_ERROR(written);
    if (json_) {
      PrintJson({{"out", out_},
                 {"format", format_},
                 {"configs", contents.best_size()},
                 {"snapshot", contents.snapshot_id()}});
    } else {
      std::cout << fmt::format("wrote {} config(s) as of snapshot {} to {} ({})\n",
                               contents.best_size(), contents.snapshot_id(), out_, format_);
    }
    return absl::OkStatus();
  }

 private:
  void AddOptions(CLI::App& command) override {
    command.add_option("--format", format_, "snapshot (SQLite, for libtessel), json or header")
        ->check(CLI::IsMember({"snapshot", "json", "header"}))
        ->capture_default_str();
    command.add_option("--out", out_, "file to write (written atomically)")->required();
    command.add_option("--kernel", kernels_, "only these kernels (repeatable; default all)");
    command.add_option("--snapshot-id", snapshot_id_, "as of this snapshot (default: latest)");
    AddServerOptions(command, backend_);
    command.add_option("--from-snapshot", from_snapshot_,
                       "convert this snapshot file (no database or server needed)");
    command.add_option("--model", model_,
                       "a model description (docs/models.md): write the config of each of its "
                       "ops, as lookup answers it, as json (what the Python tessel.Model reads) "
                       "or header");
    command.add_option("--target", target_, "with --model: the target the ops run on")
        ->capture_default_str();
  }

  // export --model: each op's config, looked up on the server or database.
  absl::Status RunModel() {
    if (format_ == "snapshot") {
      return absl::InvalidArgumentError(
          "--model writes --format json (what tessel.Model reads) or --format header");
    }
    if (!from_snapshot_.empty() || !kernels_.empty() || snapshot_id_ != 0) {
      return absl::InvalidArgumentError(
          "--model takes its configs from --db or --server (not with --from-snapshot, --kernel "
          "or --snapshot-id)");
    }
    TESSEL_ASSIGN_OR_RETURN(const ModelFile model, ReadModelFile(model_));
    TESSEL_RETURN_IF_ERROR(TasksOn(model, target_).status());  // every op valid on the target
    TESSEL_ASSIGN_OR_RETURN(auto backend, OpenBackend(backend_, /*must_exist=*/true));
    TESSEL_ASSIGN_OR_RETURN(const json configs, ModelConfigs(*backend->client, model, target_));
    TESSEL_RETURN_IF_ERROR(WriteFileAtomically(
        out_, format_ == "json" ? configs.dump(2) + "\n" : ModelConfigsToHeader(configs)));
    int tuned = 0;
    for (const json& op : configs["ops"]) tuned += op["match"] == "exact";
    if (json_) {
      PrintJson({{"out", out_},
                 {"format", format_},
                 {"model", model.name},
                 {"target", target_},
                 {"ops", configs["ops"].size()},
                 {"exact", tuned}});
    } else {
      std::cout << fmt::format(
          "wrote the configs of {} op(s) of {} on {} to {} ({}; {} tuned "
          "for their exact workload, the rest by lookup's fallback)\n",
          configs["ops"].size(), model.name, target_, out_, format_, tuned);
    }
    return absl::OkStatus();
  }

  // What to write: the snapshot file's contents, or the server's export.
  absl::StatusOr<v1::ExportResponse> Contents() const {
    if (!from_snapshot_.empty()) {
      TESSEL_ASSIGN_OR_RETURN(auto snapshot, client::Snapshot::Open(from_snapshot_));
      return FilterKernels(snapshot->ToExport(), kernels_);
    }
    TESSEL_ASSIGN_OR_RETURN(auto backend, OpenBackend(backend_, /*must_exist=*/true));
    v1::ExportRequest request;
    for (const std::string& k : kernels_) request.add_kernels(k);
    request.set_snapshot_id(snapshot_id_);
    return backend->client->Export(request);
  }

  ServerArgs backend_;
  std::string from_snapshot_;        // read this snapshot file instead of a db or server
  std::string format_ = "snapshot";  // snapshot | json | header
  std::string out_;
  std::vector<std::string> kernels_;
  int64_t snapshot_id_ = 0;
  std::string model_;  // --model: a model description
  std::string target_ = kDefaultTarget;
};

class ImportCommand final : public Command {
 public:
  ImportCommand()
      : Command("import", "publish the configs of a snapshot or JSON export (idempotent)",
                "tessel import configs.tsnap --db tessel.db") {}

  // Publishes the file's best configs and prints how many were new and which were refused, with
  // why (one JSON object with --json). NotFound for an unreadable file; InvalidArgument for a
  // malformed one; exit code 1 when a record was refused.
  absl::Status Run(int& exit_code) override {
    v1::ImportRequest request;
    if (IsSqliteFile(file_)) {
      TESSEL_ASSIGN_OR_RETURN(auto snapshot, client::Snapshot::Open(file_));
      for (const auto& b : snapshot->entries()) *request.add_best() = b;
    } else {
      std::ifstream in(file_);
      if (!in) return absl::NotFoundError(StrCat("cannot read ", file_));
      std::stringstream text;
      text << in.rdbuf();
      auto contents = ExportFromJson(text.str());
      if (!contents.ok()) {
        return absl::Status(contents.status().code(),
                            StrCat(file_, ": ", std::string(contents.status().message())));
      }
      for (const auto& b : contents->best()) *request.add_best() = b;
    }
    TESSEL_ASSIGN_OR_RETURN(auto backend, OpenBackend(backend_, /*must_exist=*/false));
    TESSEL_ASSIGN_OR_RETURN(const v1::ImportResponse imported, backend->client->Import(request));
    json refused = json::array();
    for (const v1::RefusedImport& r : imported.refused()) {
      refused.push_back({{"index", r.index()}, {"workload", r.workload()}, {"reason", r.reason()}});
      std::fprintf(stderr, "tessel: error: %s: record %d (%s) refused: %s\n", file_.c_str(),
                   r.index(), r.workload().c_str(), r.reason().c_str());
    }
    if (json_) {
      PrintJson({{"file", file_},
                 {"imported", imported.imported()},
                 {"unchanged", imported.unchanged()},
                 {"refused", refused}});
    } else {
      std::cout << fmt::format("{}: {} imported, {} unchanged, {} refused\n", file_,
                               imported.imported(), imported.unchanged(), refused.size());
    }
    // Some records were not imported: a script must notice.
    if (!imported.refused().empty()) exit_code = kExitFailure;
    return absl::OkStatus();
  }

 private:
  void AddOptions(CLI::App& command) override {
    command.add_option("file", file_, "snapshot or JSON export file")->required();
    AddServerOptions(command, backend_);
  }

  std::string file_;
  ServerArgs backend_;
};

}  // namespace

std::unique_ptr<Command> NewExportCommand() { return std::make_unique<ExportCommand>(); }
std::unique_ptr<Command> NewImportCommand() { return std::make_unique<ImportCommand>(); }

}  // namespace tessel::cli
