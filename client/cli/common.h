// Pieces every `tessel` command shares: input validation, output helpers and the connection to a
// server (remote with --server, embedded on --db otherwise).
#ifndef TESSEL_CLIENT_CLI_COMMON_H_
#define TESSEL_CLIENT_CLI_COMMON_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "client/client.h"
#include "kernels/kernel.h"
#include "nlohmann/json.hpp"
#include "schema/tessel.pb.h"
#include "schema/vocab.h"
#include "server/server.h"
#include "sim/target.h"
#include "worker/agent.h"

namespace tessel::cli {

inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;
inline constexpr const char* kDefaultDb = "./tessel.db";
// kDefaultTarget and kDefaultDtype come from schema/vocab.h.

// A workload checked against the local kernel registry and target files (kernels::Resolve).
struct Workload {
  const kernels::Kernel* kernel = nullptr;
  kernels::Problem problem;
  std::string target_name;
  // Dims in the kernel's canonical order, e.g. "M=512,N=512,K=512".
  std::string shape;

  tessel::v1::Workload ToProto() const {
    tessel::v1::Workload workload;
    workload.set_kernel(std::string(kernel->name()));
    for (const std::string& name : kernel->dims()) {
      tessel::v1::Dim* dim = workload.add_dims();
      dim->set_name(name);
      dim->set_value(problem.dims.Get(name).value_or(0));
    }
    workload.set_dtype(problem.dtype);
    workload.set_target(target_name);
    return workload;
  }
};

// The kernel, or InvalidArgument listing the known ones (kernels::ResolveKernel).
absl::StatusOr<const kernels::Kernel*> FindKernelOrExplain(const std::string& name);
// The target, or InvalidArgument naming it (kernels::ResolveTarget).
absl::StatusOr<sim::Target> LoadTargetOrExplain(const std::string& name);
// Checks kernel, shape, dtype and target before any work is done (kernels::Resolve, after
// parsing --shape); InvalidArgument saying what is wrong.
absl::StatusOr<Workload> ValidateWorkload(const std::string& kernel_name, const std::string& shape,
                                          const std::string& dtype, const std::string& target);
// "M=512,N=512,K=512" in the workload's dim order.
std::string ShapeOf(const tessel::v1::Workload& workload);
// A --time-limit value in whole seconds: plain seconds ("90") or a number with a unit s, m or h
// ("30s", "2m", "1h"); "0" is no limit. InvalidArgument naming `flag` for anything else (a
// negative, fractional or empty value, another unit, more than 2^31 - 1 seconds).
absl::StatusOr<int> ParseTimeLimitSeconds(const std::string& text, const std::string& flag);
// A time in the unit that suits it, with 3-4 significant digits: "789 ns", "45.6 us", "1.23 ms",
// "5.60 s", "12.3 min"; "-" for a time that is not one (<= 0, NaN).
std::string HumanTime(double ns);
// Prints one JSON object on stdout.
void PrintJson(const nlohmann::json& object);

// `text` (a --config value) merged over the kernel's default for `workload` on `target`: the
// default when empty. InvalidArgument for a malformed value or a parameter the kernel lacks.
absl::StatusOr<Config> ConfigFor(const Workload& workload, const sim::Target& target,
                                 const std::string& text);

// A config the kernel refused (`why`, an InvalidArgument from the simulation) as `simulate` and
// `explain` report it: `out` (the workload and config) with "valid": false and "reason" as one
// JSON object with `as_json`, else one line; and exit code 1, so a script never mistakes a refusal
// for a result.
void ReportInvalidConfig(nlohmann::json out, const absl::Status& why, bool as_json, int& exit_code);

// The bottleneck of `config` (a config string) for `workload` on its target, simulated here:
// {"bound", "busiest": {engine: busy_frac}, "try_next": [...], "summary"}; null when the config
// cannot be simulated here (unknown target, invalid config).
nlohmann::json BottleneckJson(const Workload& workload, const std::string& config);

// A column of a text table: its title, and whether its cells are right-aligned (numbers).
struct Column {
  std::string title;
  bool right = false;
};
// `rows` as a table under `columns`, each column as wide as its widest cell (the last one is not
// padded), two spaces between columns, one line per row.
std::string FormatTable(const std::vector<Column>& columns,
                        const std::vector<std::vector<std::string>>& rows);

// How a listing command (`jobs`, `workers`, `kernels`, `targets`) prints its rows: as an aligned
// table when `columns` is set (each row's cells from `cells`), else one `line` per row.
struct ListFormat {
  std::string key;              // --json prints {key: rows}
  std::vector<Column> columns;  // a table's columns
  std::function<std::vector<std::string>(const nlohmann::json& row)> cells;
  std::function<std::string(const nlohmann::json& row)> line;  // one row's text, with its '\n'
  std::string when_empty;                                      // printed when there are no rows
  std::string footer;                                          // printed after the rows, if any
};
// Prints `rows` (a JSON array) as one JSON object with `as_json`, else as text per `format`.
void PrintList(const nlohmann::json& rows, bool as_json, const ListFormat& format);

// A server to talk to: remote (--server) or embedded on a database file (--db).
struct Backend {
  std::unique_ptr<server::Server> server;  // set in embedded mode
  std::unique_ptr<client::Client> client;
  ~Backend();
};

// Connects to `server_address` when set, else opens an embedded server (no network port) on
// `db_path`. With `must_exist`, a missing database is NotFound instead of being created (read-only
// commands should not leave empty files behind).
// `remote` is how to reach a remote server (token, TLS); its connect timeout is the CLI's.
// `noise_sigma` and `promote_top` (-1: the default) set an embedded server's measurements.
absl::StatusOr<std::unique_ptr<Backend>> OpenBackend(const std::string& server_address,
                                                     const std::string& db_path, bool must_exist,
                                                     client::ClientOptions remote = {},
                                                     double noise_sigma = 0, int promote_top = -1);

// Worker threads in this process, serving an embedded server (nothing for a remote one).
class EmbeddedWorkers {
 public:
  EmbeddedWorkers() = default;
  ~EmbeddedWorkers() { Stop(); }
  EmbeddedWorkers(const EmbeddedWorkers&) = delete;
  EmbeddedWorkers& operator=(const EmbeddedWorkers&) = delete;

  // Starts `threads` measuring threads (hardware threads when <= 0) when `backend` is embedded.
  absl::Status Start(Backend& backend, int threads);
  // Finishes the trials in progress and stops. Idempotent.
  void Stop();

 private:
  std::unique_ptr<worker::Agent> agent_;
  std::thread thread_;
};

}  // namespace tessel::cli

#endif  // TESSEL_CLIENT_CLI_COMMON_H_
