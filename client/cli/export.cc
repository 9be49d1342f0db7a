#include "client/cli/export.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "client/cli/common.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "schema/key.h"
#include "schema/strings.h"

namespace tessel::cli {
namespace {

using nlohmann::json;
namespace v1 = tessel::v1;

// Version of the JSON export layout. 1: initial layout.
constexpr int kJsonExportVersion = 1;
constexpr char kJsonExportFormat[] = "tessel-export";

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

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string ExportToJson(const v1::ExportResponse& contents) {
  json out;
  out["format"] = kJsonExportFormat;
  out["format_version"] = kJsonExportVersion;
  out["key_version"] = kKeyVersion;
  out["snapshot_id"] = contents.snapshot_id();
  json kernels = json::object(), targets = json::object();
  for (const auto& k : contents.kernels()) kernels[k.name()] = k.version();
  for (const auto& t : contents.targets()) targets[t.name()] = t.version();
  out["kernels"] = kernels;
  out["targets"] = targets;
  json best = json::array();
  for (const auto& b : contents.best()) {
    best.push_back({{"kernel", b.kernel()},
                    {"dims", b.dims()},
                    {"dtype", b.dtype()},
                    {"target", b.target()},
                    {"kernel_version", b.kernel_version()},
                    {"target_version", b.target_version()},
                    {"config", b.config()},
                    {"time_ns", b.time_ns()},
                    {"job_id", b.job_id()},
                    {"snapshot_id", b.snapshot_id()},
                    {"published_unix_ms", b.published_unix_ms()}});
  }
  out["best"] = best;
  json defaults = json::array();
  for (const auto& d : contents.defaults()) {
    defaults.push_back({{"kernel", d.kernel()},
                        {"dtype", d.dtype()},
                        {"target", d.target()},
                        {"config", d.config()}});
  }
  out["defaults"] = defaults;
  return out.dump(2) + "\n";
}

absl::StatusOr<v1::ExportResponse> ExportFromJson(const std::string& text) {
  json in = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (in.is_discarded() || !in.is_object() || in.value("format", "") != kJsonExportFormat) {
    return absl::InvalidArgumentError("not a tessel JSON export (expected \"format\": \"" +
                                      std::string(kJsonExportFormat) + "\")");
  }
  if (in.value("format_version", 0) != kJsonExportVersion) {
    return absl::FailedPreconditionError(
        StrCat("JSON export has format_version ", in.value("format_version", 0),
               "; this tessel reads version ", kJsonExportVersion));
  }
  v1::ExportResponse out;
  try {
    out.set_snapshot_id(in.value("snapshot_id", int64_t{0}));
    for (const auto& b : in.at("best")) {
      v1::BestConfig* r = out.add_best();
      r->set_kernel(b.at("kernel").get<std::string>());
      r->set_dims(b.at("dims").get<std::string>());
      r->set_dtype(b.at("dtype").get<std::string>());
      r->set_target(b.at("target").get<std::string>());
      r->set_kernel_version(b.at("kernel_version").get<int>());
      r->set_target_version(b.at("target_version").get<int>());
      r->set_config(b.at("config").get<std::string>());
      r->set_time_ns(b.at("time_ns").get<double>());
      r->set_job_id(b.value("job_id", int64_t{0}));
      r->set_snapshot_id(b.value("snapshot_id", int64_t{0}));
      r->set_published_unix_ms(b.value("published_unix_ms", int64_t{0}));
    }
    // Named locals: items() of a temporary would dangle inside the loop.
    const json kernels = in.value("kernels", json::object());
    const json targets = in.value("targets", json::object());
    const json defaults = in.value("defaults", json::array());
    for (const auto& [name, version] : kernels.items()) {
      v1::VersionInfo* v = out.add_kernels();
      v->set_name(name);
      v->set_version(version.get<int>());
    }
    for (const auto& [name, version] : targets.items()) {
      v1::VersionInfo* v = out.add_targets();
      v->set_name(name);
      v->set_version(version.get<int>());
    }
    for (const auto& d : defaults) {
      v1::DefaultConfig* r = out.add_defaults();
      r->set_kernel(d.at("kernel").get<std::string>());
      r->set_dtype(d.at("dtype").get<std::string>());
      r->set_target(d.at("target").get<std::string>());
      r->set_config(d.at("config").get<std::string>());
    }
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(StrCat("malformed JSON export: ", e.what()));
  }
  return out;
}

std::string ExportToHeader(const v1::ExportResponse& contents) {
  std::map<std::string, int> kernel_versions, target_versions;
  for (const auto& k : contents.kernels()) kernel_versions[k.name()] = k.version();
  for (const auto& t : contents.targets()) target_versions[t.name()] = t.version();
  std::string out;
  out += fmt::format(
      "// Generated by `tessel export --format header` from snapshot {}. Do not edit.\n"
      "// Regenerate it (e.g. with tessel_generate_header() in CMake) after tuning more shapes.\n"
      "#ifndef TESSEL_TUNED_CONFIGS_H_\n#define TESSEL_TUNED_CONFIGS_H_\n\n"
      "#include <cstdint>\n#include <string_view>\n\nnamespace tessel_tuned {{\n\n"
      "inline constexpr std::int64_t kSnapshotId = {};\n\n"
      "struct Entry {{\n  std::string_view kernel;\n  std::string_view dims;  // canonical: "
      "sorted by name\n  std::string_view dtype;\n  std::string_view target;\n"
      "  std::string_view config;\n  double time_ns;\n  bool stale;  // tuned under an older "
      "kernel or target version\n}};\n\n",
      contents.snapshot_id(), contents.snapshot_id());
  out += "inline constexpr Entry kEntries[] = {\n";
  for (const auto& b : contents.best()) {
    const bool stale =
        (kernel_versions.count(b.kernel()) && kernel_versions[b.kernel()] != b.kernel_version()) ||
        (target_versions.count(b.target()) && target_versions[b.target()] != b.target_version());
    out += fmt::format("    {{{}, {}, {}, {}, {}, {:.17g}, {}}},\n", Quote(b.kernel()),
                       Quote(b.dims()), Quote(b.dtype()), Quote(b.target()), Quote(b.config()),
                       b.time_ns(), stale ? "true" : "false");
  }
  if (contents.best_size() == 0) out += "    {\"\", \"\", \"\", \"\", \"\", 0, false},\n";
  out +=
      "};\n\nstruct Default {\n  std::string_view kernel;\n  std::string_view dtype;\n"
      "  std::string_view target;\n  std::string_view config;\n};\n\n"
      "inline constexpr Default kDefaults[] = {\n";
  for (const auto& d : contents.defaults()) {
    out += fmt::format("    {{{}, {}, {}, {}}},\n", Quote(d.kernel()), Quote(d.dtype()),
                       Quote(d.target()), Quote(d.config()));
  }
  if (contents.defaults_size() == 0) out += "    {\"\", \"\", \"\", \"\"},\n";
  out += R"(};

// The tuned config for an exact workload (dims in canonical form, e.g. "K=512,M=512,N=512"),
// else the kernel's default config for (dtype, target), else "".
constexpr std::string_view BestConfig(std::string_view kernel, std::string_view dims,
                                      std::string_view dtype, std::string_view target) {
  for (const Entry& e : kEntries) {
    if (e.kernel == kernel && e.dims == dims && e.dtype == dtype && e.target == target) {
      return e.config;
    }
  }
  for (const Default& d : kDefaults) {
    if (d.kernel == kernel && d.dtype == dtype && d.target == target) return d.config;
  }
  return {};
}

// The integer value of parameter `name` in a config string ("tile_m=128,..."), or `fallback`.
constexpr std::int64_t ParamValue(std::string_view config, std::string_view name,
                                  std::int64_t fallback) {
  std::size_t start = 0;
  while (start <= config.size()) {
    std::size_t end = config.find(',', start);
    if (end == std::string_view::npos) end = config.size();
    std::string_view item = config.substr(start, end - start);
    std::size_t eq = item.find('=');
    if (eq != std::string_view::npos && item.substr(0, eq) == name) {
      std::int64_t value = 0;
      std::string_view digits = item.substr(eq + 1);
      if (digits.empty()) return fallback;
      for (char c : digits) {
        if (c < '0' || c > '9') return fallback;
        value = value * 10 + (c - '0');
      }
      return value;
    }
    start = end + 1;
  }
  return fallback;
}

}  // namespace tessel_tuned

#endif  // TESSEL_TUNED_CONFIGS_H_
)";
  return out;
}

CLI::App* AddExportCommand(CLI::App& app, ExportArgs& args) {
  CLI::App* cmd = app.add_subcommand(
      "export", "write published best configs to a snapshot, JSON or C++ header file");
  cmd->add_option("--format", args.format, "snapshot (SQLite, for libtessel), json or header")
      ->check(CLI::IsMember({"snapshot", "json", "header"}))
      ->capture_default_str();
  cmd->add_option("--out", args.out, "file to write (written atomically)")->required();
  cmd->add_option("--kernel", args.kernels, "only these kernels (repeatable; default all)");
  cmd->add_option("--snapshot-id", args.snapshot_id, "as of this snapshot (default: latest)");
  cmd->add_flag("--json", args.json, "print one JSON object describing what was written");
  cmd->add_option("--server", args.server, "tessel-server address (HOST:PORT)");
  cmd->add_option("--db", args.db, "database file (default ./tessel.db)");
  cmd->add_option("--from-snapshot", args.from_snapshot,
                  "convert this snapshot file (no database or server needed)");
  return cmd;
}

CLI::App* AddImportCommand(CLI::App& app, ImportArgs& args) {
  CLI::App* cmd =
      app.add_subcommand("import", "publish the configs of a snapshot or JSON export (idempotent)");
  cmd->add_option("file", args.file, "snapshot or JSON export file")->required();
  cmd->add_flag("--json", args.json, "print one JSON object");
  cmd->add_option("--server", args.server, "tessel-server address (HOST:PORT)");
  cmd->add_option("--db", args.db, "database file (default ./tessel.db; created when absent)");
  return cmd;
}

absl::Status RunExport(const ExportArgs& args) {
  const int sources = !args.server.empty() + !args.db.empty() + !args.from_snapshot.empty();
  if (sources > 1) {
    return absl::InvalidArgumentError("give one of --server, --db or --from-snapshot");
  }
  absl::StatusOr<v1::ExportResponse> contents;
  if (!args.from_snapshot.empty()) {
    auto snapshot = client::Snapshot::Open(args.from_snapshot);
    if (!snapshot.ok()) return snapshot.status();
    contents = (*snapshot)->ToExport();
    if (!args.kernels.empty()) {
      v1::ExportResponse filtered = *contents;
      filtered.clear_best();
      filtered.clear_defaults();
      auto wanted = [&](const std::string& k) {
        return std::find(args.kernels.begin(), args.kernels.end(), k) != args.kernels.end();
      };
      for (const auto& b : contents->best()) {
        if (wanted(b.kernel())) *filtered.add_best() = b;
      }
      for (const auto& d : contents->defaults()) {
        if (wanted(d.kernel())) *filtered.add_defaults() = d;
      }
      contents = std::move(filtered);
    }
  } else {
    auto backend = OpenBackend(args.server, args.db.empty() ? kDefaultDb : args.db,
                               /*must_exist=*/true);
    if (!backend.ok()) return backend.status();
    v1::ExportRequest request;
    for (const std::string& k : args.kernels) request.add_kernels(k);
    request.set_snapshot_id(args.snapshot_id);
    contents = (*backend)->client->Export(request);
  }
  if (!contents.ok()) return contents.status();
  absl::Status written;
  if (args.format == "snapshot") {
    written = client::WriteSnapshot(*contents, args.out);
  } else if (args.format == "json") {
    written = WriteFileAtomically(args.out, ExportToJson(*contents));
  } else {
    written = WriteFileAtomically(args.out, ExportToHeader(*contents));
  }
  if (!written.ok()) return written;
  if (args.json) {
    PrintJson({{"out", args.out},
               {"format", args.format},
               {"configs", contents->best_size()},
               {"snapshot", contents->snapshot_id()}});
  } else {
    std::cout << fmt::format("wrote {} config(s) as of snapshot {} to {} ({})\n",
                             contents->best_size(), contents->snapshot_id(), args.out, args.format);
  }
  return absl::OkStatus();
}

absl::Status RunImport(const ImportArgs& args) {
  if (!args.server.empty() && !args.db.empty()) {
    return absl::InvalidArgumentError("give --server or --db, not both");
  }
  v1::ImportRequest request;
  if (IsSqliteFile(args.file)) {
    auto snapshot = client::Snapshot::Open(args.file);
    if (!snapshot.ok()) return snapshot.status();
    for (const auto& b : (*snapshot)->entries()) *request.add_best() = b;
  } else {
    std::ifstream in(args.file);
    if (!in) return absl::NotFoundError(StrCat("cannot read ", args.file));
    std::stringstream text;
    text << in.rdbuf();
    auto contents = ExportFromJson(text.str());
    if (!contents.ok()) {
      return absl::Status(contents.status().code(),
                          StrCat(args.file, ": ", std::string(contents.status().message())));
    }
    for (const auto& b : contents->best()) *request.add_best() = b;
  }
  auto backend = OpenBackend(args.server, args.db.empty() ? kDefaultDb : args.db,
                             /*must_exist=*/false);
  if (!backend.ok()) return backend.status();
  auto imported = (*backend)->client->Import(request);
  if (!imported.ok()) return imported.status();
  if (args.json) {
    PrintJson({{"file", args.file},
               {"imported", imported->imported()},
               {"unchanged", imported->unchanged()}});
  } else {
    std::cout << fmt::format("{}: {} imported, {} unchanged\n", args.file, imported->imported(),
                             imported->unchanged());
  }
  return absl::OkStatus();
}

}  // namespace tessel::cli
