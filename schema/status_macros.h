// The one pair of early-return macros for absl::Status and absl::StatusOr, used by every folder.
//
//   TESSEL_RETURN_IF_ERROR(store.Commit());            // returns the error status, if any
//   TESSEL_ASSIGN_OR_RETURN(auto dims, Dims::Parse(s)); // declares `dims` or returns the error
//   TESSEL_ASSIGN_OR_RETURN(existing, Load(path));       // assigns to an existing variable
//
// Both evaluate their expression exactly once. The enclosing function must return absl::Status
// or absl::StatusOr<U> (the error status converts to either).
#ifndef TESSEL_SCHEMA_STATUS_MACROS_H_
#define TESSEL_SCHEMA_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tessel::status_internal {

// The status of a Status or StatusOr, so TESSEL_RETURN_IF_ERROR accepts either.
inline const absl::Status& GetStatus(const absl::Status& status) { return status; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

}  // namespace tessel::status_internal

// Evaluates `expr` (an absl::Status or absl::StatusOr<T>) and returns its status from the
// enclosing function when it is not OK. A StatusOr's value is discarded.
#define TESSEL_RETURN_IF_ERROR(expr)                                  \
  do {                                                                \
    if (const auto& tessel_status_ = (expr);                          \
        !::tessel::status_internal::GetStatus(tessel_status_).ok()) { \
      return ::tessel::status_internal::GetStatus(tessel_status_);    \
    }                                                                 \
  } while (false)

// Evaluates `rexpr` (an absl::StatusOr<T>); returns its status from the enclosing function when
// it is not OK, else moves its value into `lhs`, which is a declaration (`auto x`,
// `const T& x`) or an existing lvalue. `lhs` may not contain an unparenthesised comma; use
// `auto` for such types. Expands to several statements: do not use it as the body of an
// unbraced if or loop.
#define TESSEL_ASSIGN_OR_RETURN(lhs, rexpr)                                                        \
  TESSEL_ASSIGN_OR_RETURN_IMPL_(TESSEL_STATUS_MACROS_CONCAT_(tessel_status_or_, __COUNTER__), lhs, \
                                rexpr)

#define TESSEL_ASSIGN_OR_RETURN_IMPL_(status_or, lhs, rexpr) \
  auto status_or = (rexpr);                                  \
  if (!status_or.ok()) return std::move(status_or).status(); \
  lhs = *std::move(status_or)

#define TESSEL_STATUS_MACROS_CONCAT_(a, b) TESSEL_STATUS_MACROS_CONCAT_IMPL_(a, b)
#define TESSEL_STATUS_MACROS_CONCAT_IMPL_(a, b) a##b

#endif  // TESSEL_SCHEMA_STATUS_MACROS_H_
