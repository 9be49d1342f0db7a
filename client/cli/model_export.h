// `tessel export --model FILE`: the config of every op of a model description (docs/models.md),
// as the server's graded lookup answers it for the op's workload on one target, written as one
// JSON file (what the Python tessel.Model reads) or one C++ header.
#ifndef TESSEL_CLIENT_CLI_MODEL_EXPORT_H_
#define TESSEL_CLIENT_CLI_MODEL_EXPORT_H_

#include <string>

#include "absl/status/statusor.h"
#include "client/cli/model_file.h"
#include "client/client.h"
#include "nlohmann/json.hpp"

namespace tessel::cli {

// The model's export format version (the "format" field).
inline constexpr int kModelExportFormat = 1;

// {"format", "model", "target", "ops": [{"name", "kernel", "dims", "dtype", "count", "config",
// "match", "time_ns", "adapted", "snapshot_id"}]}: each op's config looked up on `client`.
absl::StatusOr<nlohmann::json> ModelConfigs(client::Client& client, const ModelFile& model,
                                            const std::string& target);

// The same as a C++ header: namespace tessel_model_<model name>, kOps[] and ConfigOf(op).
std::string ModelConfigsToHeader(const nlohmann::json& configs);

}  // namespace tessel::cli

#endif  // TESSEL_CLIENT_CLI_MODEL_EXPORT_H_
