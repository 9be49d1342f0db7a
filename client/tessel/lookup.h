// The installed entry point of libtessel: `#include <tessel/lookup.h>` and link tessel::tessel.
// See client/lookup.h for the API (tessel::client::Lookup, LookupOptions, LookupResult).
#ifndef TESSEL_TESSEL_LOOKUP_H_
#define TESSEL_TESSEL_LOOKUP_H_

#include "client/lookup.h"  // IWYU pragma: export

#endif  // TESSEL_TESSEL_LOOKUP_H_
