// `tessel lookup KERNEL --shape DIMS`: the best known config for a workload, from a server (remote
// or embedded on --db) or, with --snapshot, from an exported snapshot file through libtessel.
#include <iostream>
#include <memory>

#include "client/cli/command.h"
#include "client/cli/options.h"
#include "client/snapshot.h"
#include "fmt/format.h"
#include "schema/status_macros.h"

namespace tessel::cli {
namespace {

namespace v1 = tessel::v1;
using nlohmann::json;

class LookupCommand final : public Command {
 public:
  LookupCommand()
      : Command("lookup", "the best known config for a workload",
                "tessel lookup matmul --shape M=4096,N=4096,K=4096 --target snc2") {}

  // Prints the answer (config, match level, time, provenance): one JSON object with --json.
  // InvalidArgument for a bad workload; NotFound when nothing is known of the kernel.
  absl::Status Run(int&) override {
    TESSEL_ASSIGN_OR_RETURN(const Workload workload, ValidateWorkload(workload_));
    if (!snapshot_.empty()) {
      // libtessel's snapshot reader: no server and no database needed.
      TESSEL_ASSIGN_OR_RETURN(auto snapshot, client::Snapshot::Open(snapshot_));
      TESSEL_ASSIGN_OR_RETURN(const client::LookupResult found,
                              snapshot->Find(workload_.kernel, workload.problem.dims,
                                             workload_.dtype, workload_.target));
      Print(workload, found, /*from_snapshot=*/true);
      return absl::OkStatus();
    }
    TESSEL_ASSIGN_OR_RETURN(auto backend, OpenBackend(backend_, /*must_exist=*/true));
    TESSEL_ASSIGN_OR_RETURN(const v1::LookupResponse response,
                            backend->client->Lookup(workload.ToProto()));
    Print(workload, client::FromLookupResponse(response), /*from_snapshot=*/false);
    return absl::OkStatus();
  }

 private:
  void AddOptions(CLI::App& command) override {
    AddWorkloadOptions(command, workload_);
    command.add_option("--snapshot", snapshot_, "exported snapshot file");
    AddServerOptions(command, backend_);
  }

  // Prints the answer as the CLI contract's JSON object (with `source`, where libtessel found
  // it, for a snapshot answer) or as lines ending with its provenance and its bottleneck
  // (simulated here).
  void Print(const Workload& workload, const client::LookupResult& found,
             bool from_snapshot) const {
    const std::string& shape = workload.shape;
    const json bottleneck = BottleneckJson(workload, found.config);
    if (json_) {
      json out = {{"kernel", workload_.kernel},     {"shape", shape},
                  {"dtype", workload_.dtype},       {"target", workload_.target},
                  {"config", found.config},         {"match", found.match},
                  {"time_ns", found.time_ns},       {"stale", found.stale},
                  {"snapshot", found.snapshot_id},  {"job_id", found.job_id},
                  {"tuned_dims", found.tuned_dims}, {"tuned_target", found.tuned_target},
                  {"adapted", found.adapted},       {"adaptation", found.adaptation}};
      if (from_snapshot) out["source"] = found.source;
      out["bottleneck"] = bottleneck;
      PrintJson(out);
      return;
    }
    std::cout << fmt::format("{} {} {} on {}: {}\n", workload_.kernel, shape, workload_.dtype,
                             workload_.target, found.config);
    std::cout << fmt::format("  match: {}{}", found.match, found.stale ? " (stale)" : "");
    if (found.time_ns > 0) std::cout << fmt::format(", {}", HumanTime(found.time_ns));
    if (found.adapted) std::cout << fmt::format(", adapted ({})", found.adaptation);
    if (from_snapshot && found.snapshot_id > 0) {
      std::cout << fmt::format(", tuned at {} on {}, snapshot {}", found.tuned_dims,
                               found.tuned_target, found.snapshot_id);
    } else if (!from_snapshot && found.job_id > 0) {
      std::cout << fmt::format(", from job {} ({} on {}), snapshot {}", found.job_id,
                               found.tuned_dims, found.tuned_target, found.snapshot_id);
    }
    std::cout << "\n";
    if (!bottleneck.is_null()) {
      std::cout << "  bottleneck: " << bottleneck["summary"].get<std::string>() << "\n";
    }
    std::cout.flush();
  }

  WorkloadArgs workload_;
  ServerArgs backend_;
  std::string snapshot_;  // read this snapshot file instead of asking a server
};

}  // namespace

std::unique_ptr<Command> NewLookupCommand() { return std::make_unique<LookupCommand>(); }

}  // namespace tessel::cli
