// The one workload key: "kernel|dims|dtype|target" with canonical (name-sorted) dims. It keys
// exact lookups, the server's answer cache and libtessel's in-memory tables; versions are not part
// of it (a lookup matches on the workload first, then judges staleness by versions).
#ifndef TESSEL_SCHEMA_WORKLOAD_KEY_H_
#define TESSEL_SCHEMA_WORKLOAD_KEY_H_

#include <string>
#include <string_view>

#include "schema/key.h"

namespace tessel {

// "matmul|K=512,M=1024,N=512|bf16|snc2" for any order of `dims`.
std::string WorkloadKey(std::string_view kernel, const Dims& dims, std::string_view dtype,
                        std::string_view target);
// The same key from dims already in canonical form (Dims::Canonical(), as the store keeps them).
std::string WorkloadKeyFromCanonical(std::string_view kernel, std::string_view canonical_dims,
                                     std::string_view dtype, std::string_view target);

}  // namespace tessel

#endif  // TESSEL_SCHEMA_WORKLOAD_KEY_H_
