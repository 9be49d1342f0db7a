#include "client/cli/model_export.h"

#include <cctype>
#include <cstdio>

#include "schema/status_macros.h"
#include "schema/strings.h"

namespace tessel::cli {
namespace {

using nlohmann::json;

// `text` as the body of a C++ string literal: printable ASCII as is, quotes and backslashes
// escaped, anything else as an octal escape (never a raw control character in the header).
std::string CEscape(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c >= 0x20 && c < 0x7f && c != '?') {  // '?': no trigraphs
      out += char(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\%03o", c);
      out += buf;
    }
  }
  return out;
}

// The model's name as a C++ identifier fragment: lower-case letters, digits and '_'.
std::string Identifier(const std::string& name) {
  std::string out;
  for (unsigned char c : name) out += std::isalnum(c) ? char(std::tolower(c)) : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "m" + out;
  return out;
}

}  // namespace

absl::StatusOr<json> ModelConfigs(client::Client& client, const ModelFile& model,
                                  const std::string& target) {
  TESSEL_ASSIGN_OR_RETURN(const std::vector<ModelTask> tasks, TasksOn(model, target));
  std::vector<json> ops(model.ops.size());  // in the file's order
  for (const ModelTask& task : tasks) {
    TESSEL_ASSIGN_OR_RETURN(const tessel::v1::LookupResponse found,
                            client.Lookup(task.workload.ToProto()));
    for (size_t i : task.ops) {
      const ModelOp& op = model.ops[i];
      ops[i] = json{{"name", op.name},
                    {"kernel", op.kernel},
                    {"dims", task.workload.shape},
                    {"dtype", op.dtype},
                    {"count", op.count},
                    {"config", found.config()},
                    {"match", found.match()},
                    {"time_ns", found.time_ns()},
                    {"adapted", found.adapted()},
                    {"snapshot_id", found.snapshot_id()}};
    }
  }
  return json{
      {"format", kModelExportFormat}, {"model", model.name}, {"target", target}, {"ops", ops}};
}

std::string ModelConfigsToHeader(const json& configs) {
  const std::string id = Identifier(configs["model"].get<std::string>());
  std::string guard = "TESSEL_MODEL_" + id + "_H_";
  for (char& c : guard) c = char(std::toupper(static_cast<unsigned char>(c)));
  std::string out = StrCat("// Tuned configs of the ops of model \"",
                           CEscape(configs["model"].get<std::string>()), "\" on ",
                           CEscape(configs["target"].get<std::string>()),
                           ", written by `tessel export --model`. Generated: do not edit.\n",
                           "#ifndef ", guard, "\n#define ", guard, "\n\n#include <string_view>\n\n",
                           "namespace tessel_model_", id, " {\n\n",
                           "struct OpConfig {\n"
                           "  std::string_view op, kernel, dims, dtype, config, match;\n"
                           "  double time_ns;  // measured time of the config (0: a default)\n"
                           "};\n\n",
                           "inline constexpr std::string_view kTarget = \"",
                           CEscape(configs["target"].get<std::string>()), "\";\n\n",
                           "inline constexpr OpConfig kOps[] = {\n");
  for (const json& op : configs["ops"]) {
    char time[64];
    std::snprintf(time, sizeof(time), "%.17g", op["time_ns"].get<double>());
    out += StrCat("    {\"", CEscape(op["name"].get<std::string>()), "\", \"",
                  CEscape(op["kernel"].get<std::string>()), "\", \"",
                  CEscape(op["dims"].get<std::string>()), "\", \"",
                  CEscape(op["dtype"].get<std::string>()), "\", \"",
                  CEscape(op["config"].get<std::string>()), "\", \"",
                  CEscape(op["match"].get<std::string>()), "\", ", time, "},\n");
  }
  out += StrCat("};\n\n",
                "// The config of op `name` (\"tile_m=128,...\"); empty when the model has no such "
                "op.\n",
                "constexpr std::string_view ConfigOf(std::string_view name) {\n",
                "  for (const OpConfig& op : kOps) {\n",
                "    if (op.op == name) return op.config;\n", "  }\n", "  return {};\n", "}\n\n",
                "}  // namespace tessel_model_", id, "\n\n", "#endif  // ", guard, "\n");
  return out;
}

}  // namespace tessel::cli
