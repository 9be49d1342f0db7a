#include "client/cli/lookup.h"

#include <iostream>
#include <memory>

#include "client/snapshot.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace tessel::cli {
namespace {

namespace v1 = tessel::v1;
using nlohmann::json;

// The answer as the CLI contract's JSON object; `source` (where libtessel found it) only for a
// snapshot answer.
json LookupJson(const LookupArgs& args, const std::string& shape, const client::LookupResult& found,
                bool with_source) {
  json out = {{"kernel", args.kernel},
              {"shape", shape},
              {"dtype", args.dtype},
              {"target", args.target},
              {"config", found.config},
              {"match", found.match},
              {"time_ns", found.time_ns},
              {"stale", found.stale},
              {"snapshot", found.snapshot_id},
              {"job_id", found.job_id},
              {"tuned_dims", found.tuned_dims},
              {"tuned_target", found.tuned_target}};
  if (with_source) out["source"] = found.source;
  return out;
}

client::LookupResult FromResponse(const v1::LookupResponse& response) {
  client::LookupResult r;
  r.config = response.config();
  r.match = response.match();
  r.time_ns = response.time_ns();
  r.stale = response.stale();
  r.snapshot_id = response.snapshot_id();
  r.job_id = response.job_id();
  r.tuned_dims = response.tuned_dims();
  r.tuned_target = response.tuned_target();
  r.source = "server";
  return r;
}

// "KERNEL SHAPE DTYPE on TARGET: CONFIG" and "  match: LEVEL[ (stale)][, TIME]" up to the
// provenance, which the caller ends the line with.
void PrintAnswerHead(const LookupArgs& args, const std::string& shape,
                     const client::LookupResult& found) {
  std::cout << fmt::format("{} {} {} on {}: {}\n", args.kernel, shape, args.dtype, args.target,
                           found.config);
  std::cout << fmt::format("  match: {}{}", found.match, found.stale ? " (stale)" : "");
  if (found.time_ns > 0) std::cout << fmt::format(", {}", HumanTime(found.time_ns));
}

}  // namespace

CLI::App* AddLookupCommand(CLI::App& app, LookupArgs& args) {
  CLI::App* cmd = app.add_subcommand("lookup", "the best known config for a workload");
  cmd->add_option("kernel", args.kernel, "kernel name")->required();
  cmd->add_option("--shape", args.shape, "named dims")->required();
  cmd->add_option("--dtype", args.dtype, "element type")->capture_default_str();
  cmd->add_option("--target", args.target, "target")->capture_default_str();
  cmd->add_option("--snapshot", args.snapshot, "exported snapshot file");
  cmd->add_flag("--json", args.json, "print one JSON object");
  AddServerOptions(cmd, args.backend);
  return cmd;
}

absl::Status RunLookup(const LookupArgs& args) {
  absl::StatusOr<Workload> workload =
      ValidateWorkload(args.kernel, args.shape, args.dtype, args.target);
  if (!workload.ok()) return workload.status();
  if (!args.snapshot.empty()) {
    // libtessel's snapshot reader: no server and no database needed.
    auto snapshot = client::Snapshot::Open(args.snapshot);
    if (!snapshot.ok()) return snapshot.status();
    auto found = (*snapshot)->Find(args.kernel, workload->problem.dims, args.dtype, args.target);
    if (!found.ok()) return found.status();
    if (args.json) {
      PrintJson(LookupJson(args, workload->shape, *found, /*with_source=*/true));
      return absl::OkStatus();
    }
    PrintAnswerHead(args, workload->shape, *found);
    if (found->snapshot_id > 0) {
      std::cout << fmt::format(", tuned at {} on {}, snapshot {}", found->tuned_dims,
                               found->tuned_target, found->snapshot_id);
    }
    std::cout << std::endl;
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<Backend>> backend =
      OpenBackend(args.backend.server, args.backend.db, /*must_exist=*/true);
  if (!backend.ok()) return backend.status();
  absl::StatusOr<v1::LookupResponse> response = (*backend)->client->Lookup(workload->ToProto());
  if (!response.ok()) return response.status();
  const client::LookupResult found = FromResponse(*response);
  if (args.json) {
    PrintJson(LookupJson(args, workload->shape, found, /*with_source=*/false));
    return absl::OkStatus();
  }
  PrintAnswerHead(args, workload->shape, found);
  if (found.job_id > 0) {
    std::cout << fmt::format(", from job {} ({} on {}), snapshot {}", found.job_id,
                             found.tuned_dims, found.tuned_target, found.snapshot_id);
  }
  std::cout << std::endl;
  return absl::OkStatus();
}

}  // namespace tessel::cli
