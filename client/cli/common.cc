#include "client/cli/common.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <limits>
#include <string>
#include <thread>

#include "kernels/advice.h"
#include "kernels/workload.h"
#include "schema/status_macros.h"
#include "schema/strings.h"
#include "server/wire.h"
#include "spdlog/spdlog.h"

namespace tessel::cli {

namespace {
constexpr int kConnectTimeoutMs = 3000;
}  // namespace

absl::StatusOr<const kernels::Kernel*> FindKernelOrExplain(const std::string& name) {
  return kernels::ResolveKernel(name);
}

absl::StatusOr<sim::Target> LoadTargetOrExplain(const std::string& name) {
  return kernels::ResolveTarget(name);
}

absl::StatusOr<Workload> ValidateWorkload(const std::string& kernel_name, const std::string& shape,
                                          const std::string& dtype, const std::string& target) {
  TESSEL_ASSIGN_OR_RETURN(const kernels::Kernel* kernel, kernels::ResolveKernel(kernel_name));
  if (shape.empty()) {
    return absl::InvalidArgumentError(StrCat("missing --shape; ", kernel_name, " needs dims ",
                                             StrJoin(kernel->dims(), ","),
                                             ", e.g. --shape M=4096,N=4096,K=4096"));
  }
  absl::StatusOr<Dims> dims = Dims::Parse(shape);
  if (!dims.ok()) {
    return absl::InvalidArgumentError(
        StrCat("bad --shape '", shape, "': ", std::string(dims.status().message())));
  }
  TESSEL_ASSIGN_OR_RETURN(
      kernels::ResolvedWorkload resolved,
      kernels::Resolve({.kernel = kernel_name, .dims = *dims, .dtype = dtype, .target = target}));
  Workload workload;
  workload.kernel = resolved.kernel;
  workload.shape = resolved.Shape();
  workload.problem = std::move(resolved.problem);
  workload.target_name = target;
  return workload;
}

absl::StatusOr<Config> ConfigFor(const Workload& workload, const sim::Target& target,
                                 const std::string& text) {
  if (text.empty()) return workload.kernel->Default(workload.problem, target);
  absl::StatusOr<Config> parsed = Config::Parse(text);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        StrCat("bad --config '", text, "': ", std::string(parsed.status().message())));
  }
  // The parameters given override the kernel's default; a name the kernel lacks is refused (the
  // simulator would ignore it).
  TESSEL_ASSIGN_OR_RETURN(const kernels::Space space,
                          workload.kernel->SpaceFor(workload.problem, target));
  Config config = workload.kernel->Default(workload.problem, target);
  for (const auto& [name, value] : parsed->items()) {
    const auto& params = space.params();
    if (std::none_of(params.begin(), params.end(), [&](const auto& p) { return p.name == name; })) {
      std::string known;
      for (const auto& p : params) known += (known.empty() ? "" : ", ") + p.name;
      return absl::InvalidArgumentError(StrCat("bad --config: ", workload.kernel->name(),
                                               " has no parameter '", name,
                                               "' (its parameters: ", known, ")"));
    }
    config.Set(name, value);
  }
  return config;
}

std::string ShapeOf(const v1::Workload& workload) { return server::ShapeOf(workload); }

// "1.23 ms", "45.6 us", "789 ns".
absl::StatusOr<int> ParseTimeLimitSeconds(const std::string& text, const std::string& flag) {
  auto bad = [&] {
    return absl::InvalidArgumentError(
        StrCat("bad ", flag, " '", text,
               "': expected whole seconds (e.g. 90) or a duration like 30s, 2m or 1h"));
  };
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits > 10) return bad();
  const std::string unit = text.substr(digits);
  int64_t scale = 0;
  if (unit.empty() || unit == "s") {
    scale = 1;
  } else if (unit == "m") {
    scale = 60;
  } else if (unit == "h") {
    scale = 3600;
  } else {
    return bad();
  }
  const int64_t seconds = std::stoll(text.substr(0, digits)) * scale;
  if (seconds > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(
        StrCat(flag, " '", text, "' is more than ", std::numeric_limits<int>::max(), " seconds"));
  }
  return static_cast<int>(seconds);
}

std::string HumanTime(double ns) {
  if (!(ns > 0) || !std::isfinite(ns)) return "-";
  auto digits = [](double v, const char* unit) {
    return v >= 100  ? fmt::format("{:.0f} {}", v, unit)
           : v >= 10 ? fmt::format("{:.1f} {}", v, unit)
                     : fmt::format("{:.2f} {}", v, unit);
  };
  if (ns >= 600e9) return digits(ns / 60e9, "min");
  if (ns >= 1e9) return digits(ns / 1e9, "s");
  if (ns >= 1e6) return digits(ns / 1e6, "ms");
  if (ns >= 1e3) return digits(ns / 1e3, "us");
  return fmt::format("{:.0f} ns", ns);
}

std::string FormatTable(const std::vector<Column>& columns,
                        const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(columns.size());
  for (size_t c = 0; c < columns.size(); ++c) width[c] = columns[c].title.size();
  for (const std::vector<std::string>& row : rows) {
    for (size_t c = 0; c < columns.size() && c < row.size(); ++c) {
      width[c] = std::max(width[c], row[c].size());
    }
  }
  std::string text;
  auto add_line = [&](auto cell) {
    std::string line;
    for (size_t c = 0; c < columns.size(); ++c) {
      const std::string& value = cell(c);
      const size_t pad = width[c] - std::min(width[c], value.size());
      if (c > 0) line += "  ";
      if (columns[c].right) line.append(pad, ' ');
      line += value;
      if (!columns[c].right && c + 1 < columns.size()) line.append(pad, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    text += line + "\n";
  };
  add_line([&](size_t c) -> const std::string& { return columns[c].title; });
  static const std::string kNone;
  for (const std::vector<std::string>& row : rows) {
    add_line([&](size_t c) -> const std::string& { return c < row.size() ? row[c] : kNone; });
  }
  return text;
}

void PrintJson(const nlohmann::json& object) { std::cout << object.dump(2) << std::endl; }

void ReportInvalidConfig(nlohmann::json out, const absl::Status& why, bool as_json,
                         int& exit_code) {
  exit_code = kExitFailure;
  out["valid"] = false;
  out["reason"] = std::string(why.message());
  if (as_json) {
    PrintJson(out);
    return;
  }
  std::cout << fmt::format("{} {} on {}: config {} is invalid: {}\n",
                           out["kernel"].get<std::string>(), out["shape"].get<std::string>(),
                           out["target"].get<std::string>(), out["config"].get<std::string>(),
                           out["reason"].get<std::string>());
}

nlohmann::json BottleneckJson(const Workload& workload, const std::string& config_text) {
  absl::StatusOr<Config> config = Config::Parse(config_text);
  absl::StatusOr<sim::Target> target = kernels::ResolveTarget(workload.target_name);
  if (!config.ok() || !target.ok()) return nullptr;
  absl::StatusOr<kernels::Space> space = workload.kernel->SpaceFor(workload.problem, *target);
  absl::StatusOr<sim::SimResult> result =
      kernels::Evaluate(*workload.kernel, workload.problem, *config, *target, {});
  if (!space.ok() || !result.ok()) return nullptr;
  const kernels::Bottleneck b =
      kernels::Advise(*workload.kernel, workload.problem, *target, *space, *config, *result);
  nlohmann::json busiest = nlohmann::json::object();
  for (const auto& [engine, frac] : b.busiest) busiest[engine] = frac;
  return {
      {"bound", b.bound}, {"busiest", busiest}, {"try_next", b.try_next}, {"summary", b.Summary()}};
}

void PrintList(const nlohmann::json& rows, bool as_json, const ListFormat& format) {
  if (as_json) {
    PrintJson({{format.key, rows}});
    return;
  }
  if (rows.empty()) {
    std::cout << format.when_empty;
  } else if (!format.columns.empty()) {
    std::vector<std::vector<std::string>> cells;
    for (const nlohmann::json& row : rows) cells.push_back(format.cells(row));
    std::cout << FormatTable(format.columns, cells) << format.footer;
  } else {
    for (const nlohmann::json& row : rows) std::cout << format.line(row);
    std::cout << format.footer;
  }
  std::cout.flush();
}

// ---- connection to a server: remote (--server) or embedded (--db) ----

Backend::~Backend() {
  client.reset();
  if (server) server->Shutdown();
}

// `must_exist`: read-only commands refuse to create an empty database.
absl::StatusOr<std::unique_ptr<Backend>> OpenBackend(const std::string& server_address,
                                                     const std::string& db_path, bool must_exist,
                                                     client::ClientOptions remote,
                                                     double noise_sigma, int promote_top) {
  auto backend = std::make_unique<Backend>();
  if (!server_address.empty()) {
    remote.connect_timeout_ms = kConnectTimeoutMs;
    TESSEL_ASSIGN_OR_RETURN(backend->client, client::Client::Connect(server_address, remote));
    return backend;
  }
  if (must_exist && !std::filesystem::exists(db_path)) {
    return absl::NotFoundError(
        StrCat("no tessel database at ", db_path,
               " (tune something first, or pass --db PATH or --server ADDR)"));
  }
  server::ServerOptions options;
  options.listen = "";
  options.db_path = db_path;
  options.noise_sigma = noise_sigma;
  if (promote_top >= 0) options.promote_top = promote_top;
  absl::StatusOr<std::unique_ptr<server::Server>> server = server::Server::Create(options);
  if (!server.ok()) {
    return absl::Status(server.status().code(),
                        StrCat("cannot open embedded server on ", db_path, ": ",
                               std::string(server.status().message())));
  }
  backend->server = *std::move(server);
  backend->client = std::make_unique<client::Client>(backend->server->InProcessChannel(),
                                                     StrCat("embedded server (", db_path, ")"));
  return backend;
}

absl::Status EmbeddedWorkers::Start(Backend& backend, int threads) {
  if (!backend.server) return absl::OkStatus();
  worker::AgentOptions options;
  options.name = StrCat("embedded:", getpid());
  options.threads =
      threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  options.lease_wait_ms = 200;
  TESSEL_ASSIGN_OR_RETURN(agent_,
                          worker::Agent::Create(backend.server->InProcessChannel(), options));
  thread_ = std::thread([agent = agent_.get()] {
    absl::Status status = agent->Run();
    if (!status.ok()) spdlog::error("embedded worker stopped: {}", status.ToString());
  });
  return absl::OkStatus();
}

void EmbeddedWorkers::Stop() {
  if (!agent_) return;
  agent_->Stop();
  if (thread_.joinable()) thread_.join();
  agent_.reset();
}

}  // namespace tessel::cli
