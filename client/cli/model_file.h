// A model description (docs/models.md) read for `tessel tune-model`: its ops checked, before any
// work, against the kernels and one target, and grouped into tasks, one per distinct workload.
#ifndef TESSEL_CLIENT_CLI_MODEL_FILE_H_
#define TESSEL_CLIENT_CLI_MODEL_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/cli/common.h"

namespace tessel::cli {

// The description format this reader knows.
inline constexpr int kModelFormat = 1;

// One op of the description.
struct ModelOp {
  std::string name;
  std::string kernel;
  std::string dims;  // as written
  std::string dtype;
  int64_t count = 1;
};

// A distinct workload of the model and the ops that run it.
struct ModelTask {
  Workload workload;
  std::vector<size_t> ops;  // indices into ModelFile::ops
  int64_t count = 0;        // how many times one run of the model runs it (the ops' counts)
};

struct ModelFile {
  std::string name;
  std::vector<ModelOp> ops;
};

// Reads and checks `path`: JSON of the known format with a non-empty `ops` list, each op with a
// unique name, a known kernel, dims that kernel accepts, a dtype and a positive count.
// InvalidArgument naming the file, and the op by name (or index), otherwise.
absl::StatusOr<ModelFile> ReadModelFile(const std::string& path);

// The model's tasks on `target`: identical workloads merged, in the order the ops first use
// them. InvalidArgument naming the op when its workload is not valid on the target.
absl::StatusOr<std::vector<ModelTask>> TasksOn(const ModelFile& model, const std::string& target);

}  // namespace tessel::cli

#endif  // TESSEL_CLIENT_CLI_MODEL_FILE_H_
