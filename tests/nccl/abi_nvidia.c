/* abi_facts.h as NVIDIA's nccl.h states them (the CUDA toolkit's include directory only). */
#include <nccl.h>
#define ABI_TABLE abi_nvidia
#include "abi_table.h"
