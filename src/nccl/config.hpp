// ncclConfig_t as the caller's header laid it out: `magic` proves it came from
// NCCL_CONFIG_INITIALIZER, `size` says which fields that header had (a field beyond it is
// not read), `version` which NCCL it was.
#pragma once

#include "nccl/nccl.h"

namespace strata_nccl {

struct Settings {
  bool blocking = true;
};

// `config` may be NULL (every setting inherited). InvalidArgument for a config that was
// not initialised, predates ncclConfig_t (2.14), or holds a value Strata cannot honour.
Settings read_config(const ncclConfig_t* config, const Settings& inherited);

}  // namespace strata_nccl
