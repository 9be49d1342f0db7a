// Request validation on arbitrary bytes: the first byte picks the request type, the rest is its
// wire form as a client could send it. CheckRequest must answer every parsed message (OK or
// InvalidArgument) without crashing, and a refusal's message must stay short and free of control
// characters (it is logged and shown). Page tokens are checked the same way.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/request_check.h"

namespace {

using namespace tessel;

void ExpectGoodMessage(const absl::Status& status) {
  if (status.ok()) return;
  if (status.code() != absl::StatusCode::kInvalidArgument) std::abort();
  if (status.message().size() > 300) std::abort();
  for (char c : status.message()) {
    if (static_cast<unsigned char>(c) < 0x20) std::abort();
  }
}

template <typename Request>
void Check(const uint8_t* data, size_t size) {
  Request request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return;
  ExpectGoodMessage(server::CheckRequest(request));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t kind = data[0] % 7;
  ++data;
  --size;
  switch (kind) {
    case 0:
      Check<v1::SubmitJobRequest>(data, size);
      break;
    case 1:
      Check<v1::ExportRequest>(data, size);
      break;
    case 2:
      Check<v1::RegisterRequest>(data, size);
      break;
    case 3:
      Check<v1::LeaseRequest>(data, size);
      break;
    case 4:
      Check<v1::ReportRequest>(data, size);
      break;
    case 5:
      Check<v1::HeartbeatRequest>(data, size);
      break;
    default: {
      const std::string_view token(reinterpret_cast<const char*>(data), size);
      for (char kind_char : {'j', 't'}) {
        absl::StatusOr<int64_t> id = server::PageTokenId(token, kind_char);
        if (id.ok()) {
          if (*id < 0) std::abort();
          // A token the server issued reads back as its id.
          if (*id > 0 &&
              *server::PageTokenId(server::PageToken(kind_char, *id), kind_char) != *id) {
            std::abort();
          }
        } else {
          ExpectGoodMessage(id.status());
        }
      }
    }
  }
  return 0;
}
