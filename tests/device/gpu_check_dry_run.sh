#!/usr/bin/env bash
# tools/gpu-check's flow without a GPU (--emulated), from a bundle of this build's programs
# with device-reduce-bw planted to misbehave:
#   1. it fails (exit 3): the step is FAIL, named loudly on stderr, and the next steps
#      still run and pass (the replay of PyTorch's NCCL calls, strata-perf with ranks as
#      threads and on 2 ranks, their figures in the summary); the GPU hooks are listed as
#      skipped; the exit status is 1.
#   2. it hangs (a child sleeping): the step is cut at the run's budget as TIMEOUT, its
#      child is killed too, and the steps left are SKIP (out of time).
#   tests/device/gpu_check_dry_run.sh BUILD_DIR
set -u
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bad=0
expect() {  # expect DESCRIPTION FILE REGEX
  if grep -Eq -- "$3" "$2"; then echo "ok: $1"; else echo "NOT OK: $1 (no /$3/ in $2)"; bad=1; fi
}
expect_status() {  # expect_status WANTED GOT
  if [ "$2" = "$1" ]; then echo "ok: exit status $1"; else echo "NOT OK: exit status $2, not $1"; bad=1; fi
}
absent() {
  if grep -Eq -- "$3" "$2"; then echo "NOT OK: $1 (/$3/ in $2)"; bad=1; else echo "ok: $1"; fi
}

plant() {  # plant SCRIPT_BODY: a bundle whose device-reduce-bw runs it
  rm -rf "$tmp/bundle"
  mkdir -p "$tmp/bundle/bin"
  ln -s "$build/lib" "$tmp/bundle/lib"
  for f in "$build"/bin/*; do ln -s "$f" "$tmp/bundle/bin/"; done
  rm "$tmp/bundle/bin/device-reduce-bw"
  printf '#!/bin/sh\n%s\n' "$1" > "$tmp/bundle/bin/device-reduce-bw"
  chmod +x "$tmp/bundle/bin/device-reduce-bw"
}

echo "== 1. a failing step"
plant 'echo planted failure >&2; exit 3'
"$src/tools/gpu-check" "$tmp/out1" --bundle "$tmp/bundle" --emulated \
  --only 'environment|reduce_kernel|perf_all_reduce_n2|perf_threads_t2|fit_device_link|nccl' > "$tmp/stdout1" 2> "$tmp/stderr1"
rc=$?
cat "$tmp/out1/summary.txt"
expect_status 1 $rc
s=$tmp/out1/summary.txt
expect "environment passed" "$s" '^PASS +environment:'
expect "the planted step failed with its status" "$s" '^FAIL +reduce_kernel: .* rc 3,'
expect "its failure named on stderr" "$tmp/stderr1" 'FAIL: step reduce_kernel'
expect "its log kept" "$tmp/out1/reduce_kernel.log" 'planted failure'
expect "the replay ran first and passed" "$s" '^PASS +nccl_replay:'
expect "every variant of it" "$s" 'replay: all [0-9]+ variants passed on 2 ranks'
expect "ranks as threads passed" "$s" '^PASS +perf_threads_t2:'
expect "as 2 ranks of one process" "$s" 'emulated, 2 ranks'
expect "the device link's model fitted to it" "$s" 'STRATA_LINK_MODEL=device:[0-9.e+]+us:[0-9.e+]+GB'
expect "the next step ran and passed" "$s" '^PASS +perf_all_reduce_n2:'
expect "with its figures" "$s" 'Avg bus bandwidth'
expect "the device named" "$s" 'Rank +0 .*emulated'
expect "the NCCL hook skipped on --emulated" "$s" '^SKIP +nccl_gpu_checks: --emulated'
absent "steps not selected do not run" "$s" 'device_tests|perf_all_reduce_n4'
expect "a total" "$s" '^total .* 1 failed or timed out, 5 passed'

echo "== 2. a hanging step and the budget"
plant "sleep 300 & echo \$! > '$tmp/child.pid'; wait"
# The budget leaves the hanging step time to start even when the environment step is slow
# (3 s under load on 2 cores): it must be cut as TIMEOUT, not skipped.
GPU_CHECK_MIN_STEP=1 "$src/tools/gpu-check" "$tmp/out2" --bundle "$tmp/bundle" --emulated --budget 10 \
  --only 'environment|reduce_kernel|perf_all_reduce_n2' > /dev/null 2> "$tmp/stderr2"
rc=$?
cat "$tmp/out2/summary.txt"
expect_status 1 $rc
s=$tmp/out2/summary.txt
expect "the hanging step cut as TIMEOUT" "$s" '^TIMEOUT +reduce_kernel:'
expect "named on stderr" "$tmp/stderr2" 'TIMEOUT: step reduce_kernel'
expect "the step after it skipped, out of time" "$s" '^SKIP +perf_all_reduce_n2: out of time'
child=$(cat "$tmp/child.pid" 2>/dev/null)
if [ -n "$child" ] && ! kill -0 "$child" 2>/dev/null; then echo "ok: the step's child was killed"
else echo "NOT OK: the step's child (pid ${child:-?}) outlived it"; [ -n "$child" ] && kill "$child"; bad=1; fi

exit $bad
