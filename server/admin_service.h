// v1::AdminService: the database's backup, integrity check, retention and VACUUM, and a staged
// restore, for `tessel admin ... --server` (the tuner role). The work itself is store_admin.h's,
// shared with `tessel admin ... --db`; this is its gRPC face. Slow work (a backup, a check, a
// VACUUM) runs on a thread of its own, never on gRPC's callback threads.
#ifndef TESSEL_SERVER_ADMIN_SERVICE_H_
#define TESSEL_SERVER_ADMIN_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>

#include "server/auth.h"
#include "server/store.h"

namespace tessel::server {

// The largest backup AdminService.Restore accepts.
inline constexpr int64_t kMaxRestoreBytes = int64_t{64} << 30;

// `store` and `auth` must outlive the service.
std::unique_ptr<grpc::Service> MakeAdminService(Store* store, const Authorizer* auth);

}  // namespace tessel::server

#endif  // TESSEL_SERVER_ADMIN_SERVICE_H_
