/* Included after one nccl.h with ABI_TABLE defined: a function filling a table of
 * abi_facts.h's facts as that header states them. */
#include <stddef.h>
#include <stdint.h>

#include "abi_facts.h"

int ABI_TABLE(struct abi_fact* t) {
  const ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  const ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  int n = 0;
#define FACT(e) t[n].name = #e, t[n].value = (long long)(e), ++n;
#define FACT_PTR(e) t[n].name = #e, t[n].value = (long long)(intptr_t)(e), ++n;
  NCCL_ABI_FACTS(FACT, FACT_PTR)
#undef FACT
#undef FACT_PTR
  return n;
}
