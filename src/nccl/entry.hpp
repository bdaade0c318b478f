// How an entry point is exported: NCCL's profiling interface defines every function as
// p<name> and makes <name> a weak alias of it, so a tool may define <name> itself and call
// p<name>. The version script (libnccl.map) exports these two names and nothing else.
#pragma once

#define STRATA_NCCL_ALIAS(name) extern "C" __attribute__((weak, alias("p" #name))) decltype(p##name) name;
