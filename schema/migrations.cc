// Migrations() is defined in the generated migrations_data.cc.
#include "schema/migrations.h"
