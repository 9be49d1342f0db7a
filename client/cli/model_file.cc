#include "client/cli/model_file.h"

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "nlohmann/json.hpp"
#include "schema/status_macros.h"
#include "schema/strings.h"

namespace tessel::cli {
namespace {

using nlohmann::json;

// Longest op name and file accepted (a description is small; this bounds what is echoed).
constexpr size_t kMaxName = 256;
constexpr std::streamsize kMaxFileBytes = 16 << 20;

// The op's label in errors: its name when it has a usable one, else its index.
std::string Label(const json& op, size_t index) {
  if (op.is_object() && op.contains("name") && op["name"].is_string()) {
    const std::string name = op["name"].get<std::string>();
    if (!name.empty() && name.size() <= kMaxName) return StrCat("op '", Shown(name, 64), "'");
  }
  return StrCat("op ", index);
}

// `op[key]` as a non-empty string, or InvalidArgument naming the op and the field.
absl::StatusOr<std::string> StringField(const json& op, const std::string& key,
                                        const std::string& label) {
  if (!op.contains(key) || !op[key].is_string() || op[key].get<std::string>().empty()) {
    return absl::InvalidArgumentError(StrCat(label, ": '", key, "' must be a non-empty string"));
  }
  std::string value = op[key].get<std::string>();
  if (value.size() > kMaxName) {
    return absl::InvalidArgumentError(
        StrCat(label, ": '", key, "' is ", value.size(), " bytes (at most ", kMaxName, ")"));
  }
  return value;
}

}  // namespace

absl::StatusOr<ModelFile> ReadModelFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(StrCat("cannot read model file ", path));
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().size() > size_t(kMaxFileBytes)) {
    return absl::InvalidArgumentError(StrCat(path, ": larger than 16 MiB"));
  }
  json doc = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return absl::InvalidArgumentError(StrCat(path, ": not JSON (docs/models.md has the format)"));
  }
  if (!doc.is_object()) return absl::InvalidArgumentError(StrCat(path, ": not a JSON object"));
  if (!doc.contains("format") || !doc["format"].is_number_integer() ||
      doc["format"].get<int>() != kModelFormat) {
    return absl::InvalidArgumentError(StrCat(path, ": 'format' must be ", kModelFormat));
  }
  if (!doc.contains("ops") || !doc["ops"].is_array()) {
    return absl::InvalidArgumentError(StrCat(path, ": 'ops' must be a list"));
  }
  if (doc["ops"].empty()) {
    return absl::InvalidArgumentError(StrCat(path, ": the model has no ops"));
  }
  ModelFile model;
  model.name = doc.contains("name") && doc["name"].is_string()
                   ? Shown(doc["name"].get<std::string>(), 128)
                   : path;
  std::set<std::string> names;
  for (size_t i = 0; i < doc["ops"].size(); ++i) {
    const json& op = doc["ops"][i];
    const std::string label = StrCat(path, ": ", Label(op, i));
    if (!op.is_object()) return absl::InvalidArgumentError(StrCat(label, ": not an object"));
    ModelOp parsed;
    TESSEL_ASSIGN_OR_RETURN(parsed.name, StringField(op, "name", label));
    TESSEL_ASSIGN_OR_RETURN(parsed.kernel, StringField(op, "kernel", label));
    TESSEL_ASSIGN_OR_RETURN(parsed.dims, StringField(op, "dims", label));
    TESSEL_ASSIGN_OR_RETURN(parsed.dtype, StringField(op, "dtype", label));
    if (op.contains("count")) {
      if (!op["count"].is_number_integer() || op["count"].get<int64_t>() <= 0 ||
          op["count"].get<int64_t>() > 1'000'000) {
        return absl::InvalidArgumentError(
            StrCat(label, ": 'count' must be an integer from 1 to 1000000"));
      }
      parsed.count = op["count"].get<int64_t>();
    }
    if (!names.insert(parsed.name).second) {
      return absl::InvalidArgumentError(StrCat(label, ": a second op of this name"));
    }
    // The kernel, dims and dtype are checked here, on the kernel's default target: TasksOn
    // checks them again on each target asked for.
    absl::StatusOr<Workload> workload =
        ValidateWorkload(parsed.kernel, parsed.dims, parsed.dtype, kDefaultTarget);
    if (!workload.ok() && !absl::IsInvalidArgument(workload.status())) return workload.status();
    if (!workload.ok()) {
      return absl::InvalidArgumentError(
          StrCat(label, ": ", std::string(workload.status().message())));
    }
    model.ops.push_back(std::move(parsed));
  }
  return model;
}

absl::StatusOr<std::vector<ModelTask>> TasksOn(const ModelFile& model, const std::string& target) {
  std::vector<ModelTask> tasks;
  std::map<std::string, size_t> by_key;  // "kernel shape dtype" -> task
  for (size_t i = 0; i < model.ops.size(); ++i) {
    const ModelOp& op = model.ops[i];
    absl::StatusOr<Workload> workload = ValidateWorkload(op.kernel, op.dims, op.dtype, target);
    if (!workload.ok()) {
      return absl::InvalidArgumentError(StrCat("op '", Shown(op.name, 64), "' on ", target, ": ",
                                               std::string(workload.status().message())));
    }
    const std::string key = StrCat(op.kernel, " ", workload->shape, " ", op.dtype);
    auto [it, added] = by_key.emplace(key, tasks.size());
    if (added) {
      ModelTask task;
      task.workload = *std::move(workload);
      tasks.push_back(std::move(task));
    }
    tasks[it->second].ops.push_back(i);
    tasks[it->second].count += op.count;
  }
  return tasks;
}

}  // namespace tessel::cli
