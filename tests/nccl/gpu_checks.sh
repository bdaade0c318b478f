#!/bin/sh
# The GPU part of issue 28 (Strata's libnccl.so.2), for tools/gpu-check to run on a machine
# with a GPU and a build of this tree (nothing here can run without one: it has not run yet).
#   tests/nccl/gpu_checks.sh [BUILD_DIR]        (default: build)
# 1. collectives_check_cuda: every collective x type x operator on CUDA device buffers, two
#    ranks sharing cuda:0 (NVIDIA's NCCL refuses that), under strata-run.
#    Then device_check (tests/nccl/device_check.cpp, ncclMemAlloc's memory) with
#    STRATA_DEVICE=cuda: until now run on the emulated backend only.
# 2. The nccl* functions torch's CUDA library imports, all defined by our library.
# 3. ddp_check.py: PyTorch's ProcessGroupNCCL over our library, 2 ranks on cuda:0, DDP's
#    losses and parameters equal to one process on the whole batch.
# Python: $STRATA_GPU_PYTHON, else python3 (it needs torch 2.x with CUDA). Runs them all;
# exit status 1 when any failed. About a minute.
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
lib=$build/lib/nccl/libnccl.so.2
py=${STRATA_GPU_PYTHON:-python3}
failed=0
step() { echo "== $1"; }
verdict() { if [ "$1" -eq 0 ]; then echo "-- passed"; else echo "-- FAILED"; failed=1; fi; }

# Ours before any other libnccl.so.2 on the library path (a GPU machine's PyTorch brings
# NVIDIA's; its first run here ran these checks against NVIDIA's): the harness checks which
# one it got (HARNESS_LIBNCCL).
nccl_path="LD_LIBRARY_PATH=$(dirname "$lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
step "collectives on device buffers, 2 ranks on cuda:0"
env "$nccl_path" HARNESS_LIBNCCL="$lib" STRATA_TIMEOUT=30 python3 "$here/run_job.py" strata-run -n 2 \
  --strata-run "$build/bin/strata-run" --timeout 120 -- "$build/bin/collectives_check_cuda" '{id}'
verdict $?

step "device_check (stream order, groups, refusals, the async error) on the CUDA backend, 2 ranks on cuda:0"
env "$nccl_path" HARNESS_LIBNCCL="$lib" STRATA_DEVICE=cuda STRATA_TIMEOUT=30 python3 "$here/run_job.py" strata-run \
  -n 2 --strata-run "$build/bin/strata-run" --timeout 120 -- "$build/bin/device_check" '{id}'
verdict $?

step "torch's nccl* imports against our exports"
torch_lib=$("$py" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cuda.so"))')
if [ -f "$torch_lib" ]; then
  nm -D --undefined-only "$torch_lib" | awk '{print $NF}' | grep -E '^p?nccl' | sed 's/@.*//' | sort -u > /tmp/strata-torch-nccl.$$
  nm -D --defined-only "$lib" | awk '{print $NF}' | sort -u > /tmp/strata-ours-nccl.$$
  missing=$(comm -23 /tmp/strata-torch-nccl.$$ /tmp/strata-ours-nccl.$$)
  echo "torch imports $(wc -l < /tmp/strata-torch-nccl.$$) nccl* functions: $(tr '\n' ' ' < /tmp/strata-torch-nccl.$$)"
  rm -f /tmp/strata-torch-nccl.$$ /tmp/strata-ours-nccl.$$
  [ -z "$missing" ] || echo "missing from ours: $missing"
  [ -z "$missing" ]
  verdict $?
else
  echo "no $torch_lib (torch with CUDA is not installed for $py)"
  verdict 1
fi

step "DDP over ProcessGroupNCCL with our libnccl.so.2"
STRATA_TIMEOUT=60 "$py" "$here/ddp_check.py" --libnccl "$lib"
verdict $?

exit $failed
