#!/bin/sh
# Runs one libFuzzer harness: run_fuzzer.sh HARNESS SEEDS FOUND RUNS
# for RUNS inputs (FUZZ_SECONDS=N: for N seconds instead), from the seed corpus
# SEEDS (read only) and what earlier runs found (FOUND, where new inputs and any crashing
# input, crash-*, are written). FUZZ_SEED picks libFuzzer's seed (default 1, so a
# CI run is repeatable).
set -eu
harness=$1 seeds=$2 found=$3 runs=$4
mkdir -p "$found"
dict="$(dirname "$0")/dict/$(basename "$seeds").dict"
set -- -seed="${FUZZ_SEED:-1}" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$found/"
if [ -n "${FUZZ_SECONDS:-}" ]; then
  set -- "$@" -max_total_time="$FUZZ_SECONDS"
else
  set -- "$@" -runs="$runs"
fi
if [ -f "$dict" ]; then set -- "$@" -dict="$dict"; fi
exec "$harness" "$@" "$found" "$seeds"
