#include "client/cli/export_formats.h"

#include <map>

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
  out += R"(};

// The tuned config of an exact workload (dims in canonical form, e.g. "K=512,M=512,N=512"), else
// "": the workload was not tuned, so call the kernel with its own default for your shape. (A
// tuned config of another shape or target, or one default for every shape, is not guaranteed to
// be valid for yours; libtessel and the server adapt or check those, this header cannot.)
constexpr std::string_view BestConfig(std::string_view kernel, std::string_view dims,
                                      std::string_view dtype, std::string_view target) {
  for (const Entry& e : kEntries) {
    if (e.kernel == kernel && e.dims == dims && e.dtype == dtype && e.target == target) {
      return e.config;
    }
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

}  // namespace tessel::cli
