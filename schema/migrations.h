// The SQL migrations of schema/sql, embedded at build time.
#ifndef TESSEL_SCHEMA_MIGRATIONS_H_
#define TESSEL_SCHEMA_MIGRATIONS_H_

#include <string_view>
#include <vector>

namespace tessel {

struct Migration {
  int version;            // NNN of NNN_name.sql
  std::string_view name;  // file name
  std::string_view sql;   // the whole script
};

// Every migration, in ascending version order. Versions are unique.
const std::vector<Migration>& Migrations();

}  // namespace tessel

#endif  // TESSEL_SCHEMA_MIGRATIONS_H_
