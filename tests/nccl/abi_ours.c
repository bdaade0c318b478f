/* abi_facts.h as Strata's include/nccl/nccl.h states them. */
#include "nccl/nccl.h"
#define ABI_TABLE abi_ours
#include "abi_table.h"
