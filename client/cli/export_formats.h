// The files `tessel export` writes and `tessel import` reads: JSON and a C++ header (the snapshot
// format is libtessel's, client/snapshot.h).
#ifndef TESSEL_CLIENT_CLI_EXPORT_FORMATS_H_
#define TESSEL_CLIENT_CLI_EXPORT_FORMATS_H_

#include <string>

#include "absl/status/statusor.h"
#include "schema/tessel.pb.h"

namespace tessel::cli {

// The export as deterministic JSON text (sorted, versioned), and back.
std::string ExportToJson(const tessel::v1::ExportResponse& contents);
absl::StatusOr<tessel::v1::ExportResponse> ExportFromJson(const std::string& text);
// A C++17 header with the export as constexpr tables plus a constexpr BestConfig() that falls
// back to the kernel's default config.
std::string ExportToHeader(const tessel::v1::ExportResponse& contents);

}  // namespace tessel::cli

#endif  // TESSEL_CLIENT_CLI_EXPORT_FORMATS_H_
