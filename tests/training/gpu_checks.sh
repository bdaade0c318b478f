#!/bin/sh
# The trainer's GPU part (issue 32), for tools/gpu-check to run on a machine with a GPU and
# a build of this tree. It has not run on a GPU yet (none here).
#   tests/training/gpu_checks.sh [--dry-run] [BUILD_DIR]        (default: build)
# Needs from the build: bin/strata-train, bin/test_training, lib/libstrata-cuda.so,
# lib/libstrata-train-cuda.so; from the tree: data/tinyshakespeare.txt,
# perf/peers/torch/gpt_speed.py, training/reference/gpt_reference.py.
# 1. The device kernels on CUDA against the host kernels (test_training DeviceKernels.*,
#    1e-4 relative on CUDA: its sums run in another order).
# 2. fp32 (no TF32): 20 steps on --device cuda, the losses within 1e-4 of --device host.
# 2b. Two ranks sharing the one GPU (strata-run -n 2; a correctness check of the trainer's
#    groups on the device collectives, not of speed): dp 2 + ZeRO-1, tp 2, pp 2, and dp 2 +
#    ZeRO-3 with a prefetch and block recomputation (its gathers on a stream of their own), 20
#    fp32 steps each, the losses within 1e-4 of the same layout on --device host.
# 3. bf16: the validation loss after 500 steps within 1% of the fp32 run's.
# 4. Speed, GPT-2 small's shape (12 layers, 12 heads, 768 wide, context 1024, bytes),
#    batch 8: strata-train --device cuda --precision bf16 (tokens/s of the median step
#    among steps 6-20, and MFU) beside PyTorch eager and torch.compile of the same model
#    and batch (gpt_speed.py: the median of 10 steps after 3), and the ratios. Figures
#    only: no speed bound fails it.
# Python: $STRATA_GPU_PYTHON, else python3 (torch 2.x with CUDA, for step 4). Every step
# runs whatever the ones before it did; each ends "-- passed" or "-- FAILED", and the exit
# status is 1 when any failed. The figures are on lines beginning "-- " too (what
# tools/gpu-check copies into its summary). Meant to end within gpu-check's 180 s for it
# (not yet timed: torch.compile's compilation is most of it, and runs last).
# --dry-run: the same flow where there is no GPU, to test this script: --device emulated,
# fp32 in place of bf16 (bf16 needs cuda), 30 steps in place of 500, a 2-layer model for
# the speed step, PyTorch eager on the CPU only (no torch.compile). Its figures mean nothing.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dry=0
if [ "${1:-}" = "--dry-run" ]; then dry=1; shift; fi
build=${1:-build}
py=${STRATA_GPU_PYTHON:-python3}
train="$build/bin/strata-train"
data="$root/data/tinyshakespeare.txt"
if [ $dry -eq 1 ]; then
  dev=emulated low=fp32 long=30 torch_dev=cpu modes=eager
  gpt2="--layers 2 --heads 2 --dim 64 --ctx 64 --batch 4"
  export STRATA_DEVICE=emulated
else
  dev=cuda low=bf16 long=500 torch_dev=cuda modes="eager compile"
  gpt2="--layers 12 --heads 12 --dim 768 --ctx 1024 --batch 8"
  export STRATA_DEVICE=cuda
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# cuBLAS for libstrata-train-cuda.so (--device cuda): the toolkit's where its run path
# finds it, else the one PyTorch's NVIDIA wheels carry.
cuda_lib="$build/lib/libstrata-train-cuda.so"
if [ $dry -eq 0 ] && [ -f "$cuda_lib" ] && ldd "$cuda_lib" | grep -q 'libcublas.*not found'; then
  wheels=$("$py" - <<'PY' 2>/dev/null
import glob, os
import nvidia
for d in nvidia.__path__:
    for f in sorted(glob.glob(os.path.join(d, "**", "libcublas.so.*"), recursive=True)):
        print(os.path.dirname(f))
        raise SystemExit
PY
)
  if [ -n "$wheels" ]; then
    export LD_LIBRARY_PATH=$wheels${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    echo "cuBLAS from $wheels"
  else
    echo "no cuBLAS for $cuda_lib (neither on its run path nor in $py's nvidia wheels): --device cuda will fail"
  fi
fi
failed=0
ranks=  # train_run's: none, one process
check=  # train_run's: STRATA_CHECK=1 when set
step() { echo "== $1"; }
verdict() { if [ "$1" -eq 0 ]; then echo "-- passed"; else echo "-- FAILED"; failed=1; fi; }
# A run of strata-train into $1.log ($1: a name), its last lines shown when it fails;
# under strata-run with $ranks ranks when that is set, with STRATA_CHECK=1 when $check is
# (the ranks compare each call: calls that differ between ranks are named, not a timeout).
train_run() {
  name=$1
  shift
  timeout 300 env ${check:+STRATA_CHECK=1} ${ranks:+"$build/bin/strata-run" -n "$ranks" --} "$train" --data "$data" "$@" > "$tmp/$name.log" 2>&1
  rc=$?
  [ $rc -eq 0 ] || { echo "strata-train $* exited $rc:"; tail -30 "$tmp/$name.log"; }
  return $rc
}
# The "step N/M | loss X" lines of a log as "N X", one a line (after strata-run's "[r] ").
losses() { sed -n 's/^\(\[[0-9]*\] \)\{0,1\}step *\([0-9]*\)\/[0-9]* | loss \([0-9.]*\) .*/\2 \3/p' "$1"; }
# Every loss of $1 within relative $3 of $2's, step by step (and as many of them).
same_losses() {
  losses "$1" > "$tmp/a"
  losses "$2" > "$tmp/b"
  "$py" - "$tmp/a" "$tmp/b" "$3" <<'PY'
import sys
a = dict(l.split() for l in open(sys.argv[1]))
b = dict(l.split() for l in open(sys.argv[2]))
bound = float(sys.argv[3])
worst = max((abs(float(a[s]) - float(b[s])) / abs(float(b[s])) for s in b if s in a), default=float("inf"))
print(f"-- {len(a)} losses against {len(b)}: worst relative difference {worst:.3g} (bound {bound:g})")
sys.exit(0 if a and len(a) == len(b) and worst <= bound else 1)
PY
}

step "device kernels on $dev against the host kernels"
STRATA_TRAIN_TEST_DEVICE=$dev timeout 120 "$build/bin/test_training" --gtest_filter='DeviceKernels.*'
verdict $?

small="--layers 4 --heads 4 --dim 128 --ctx 64 --batch 16 --sample-len 0"
step "fp32: 20 steps on $dev, losses within 1e-4 of the host's"
train_run host $small --steps 20 --eval-batches 0 --device host &&
  train_run fp32_20 $small --steps 20 --eval-batches 0 --device $dev &&
  grep '^device' "$tmp/fp32_20.log" && same_losses "$tmp/fp32_20.log" "$tmp/host.log" 1e-4
verdict $?

ranks=2
for layout in "--dp 2 --zero 1" "--tp 2" "--pp 2 --microbatches 4" "--dp 2 --zero 3 --prefetch 1 --recompute block"; do
  step "2 ranks on one $dev device, $layout: 20 fp32 steps within 1e-4 of the host's"
  tag=$(echo "$layout" | tr -dc 'a-z0-9')
  train_run "host_$tag" $small $layout --steps 20 --eval-batches 0 --device host &&
    { check=1; train_run "ranks_$tag" $small $layout --steps 20 --eval-batches 0 --device $dev; } &&
    same_losses "$tmp/ranks_$tag.log" "$tmp/host_$tag.log" 1e-4
  verdict $?
  check=
done
ranks=

step "$low: the validation loss after $long steps within 1% of fp32's"
train_run fp32 $small --steps $long --eval-every $long --eval-batches 8 --log-every 100 --device $dev &&
  train_run $low.low $small --steps $long --eval-every $long --eval-batches 8 --log-every 100 --device $dev \
    --precision $low &&
  "$py" - "$tmp/fp32.log" "$tmp/$low.low.log" $long <<'PY'
import re, sys
at = sys.argv[3]
val = [re.findall(r"step +%s \| val loss ([0-9.]+)" % at, open(f).read()) for f in sys.argv[1:3]]
if not all(val):
    sys.exit(f"no validation loss at step {at} in one of the runs")
fp32, low = float(val[0][0]), float(val[1][0])
print(f"-- validation loss at step {at}: fp32 {fp32:.6f}, low precision {low:.6f}, relative "
      f"{abs(low - fp32) / fp32:.3%} (bound 1%)")
sys.exit(0 if abs(low - fp32) <= 0.01 * fp32 else 1)
PY
verdict $?

step "speed: strata-train $low beside PyTorch ($modes; $gpt2)"
train_run speed $gpt2 --steps 20 --eval-batches 0 --sample-len 0 --device $dev --precision $low &&
  grep '^device' "$tmp/speed.log" &&
  "$py" - "$tmp/speed.log" > "$tmp/ours" <<'PY'
import re, statistics, sys
late = []  # (tokens/s, MFU or None) of the steps after the fifth
for line in open(sys.argv[1]):
    m = re.match(r"step +(\d+)/\d+ .*\| +(\d+) tok/s", line)
    if m and int(m.group(1)) > 5:
        u = re.search(r"MFU ([0-9.]+)%", line)
        late.append((float(m.group(2)), float(u.group(1)) if u else None))
if not late:
    sys.exit("strata-train printed no steps after the fifth")
mfu = [u for _, u in late if u is not None]
print(statistics.median(t for t, _ in late), statistics.median(mfu) if mfu else "none", len(late))
PY
verdict $?
for mode in $modes; do
  flag=$([ $mode = eager ] || echo --compile)
  timeout 120 "$py" "$root/perf/peers/torch/gpt_speed.py" $gpt2 --steps 10 --warmup 3 --precision $low \
    --device $torch_dev --data "$data" $flag > "$tmp/torch_$mode" 2>&1
  rc=$?
  cat "$tmp/torch_$mode"
  verdict $rc
done
# The comparison, from what ran: MFU of PyTorch from ours (the same model, so the same
# FLOPs per token).
"$py" - "$tmp" $modes <<'PY'
import os, re, sys
tmp = sys.argv[1]
def read(name):
    p = os.path.join(tmp, name)
    return open(p).read() if os.path.exists(p) else ""
ours = read("ours").split()
if len(ours) != 3:
    sys.exit(print("-- no strata-train figure: no comparison"))
tok, mfu = float(ours[0]), None if ours[1] == "none" else float(ours[1])
print(f"-- strata-train: {tok:.0f} tok/s (median step of {ours[2]})" + (f", MFU {mfu:.1f}%" if mfu else ", no MFU"))
for mode in sys.argv[2:]:
    m = re.search(r"([0-9]+) tok/s", read("torch_" + mode))
    if not m:
        print(f"-- torch {mode}: no figure")
        continue
    theirs = float(m.group(1))
    print(f"-- torch {mode}: {theirs:.0f} tok/s" + (f", MFU {mfu * theirs / tok:.1f}%" if mfu else "")
          + f" | strata-train / torch {mode}: {tok / theirs:.2f}")
PY

exit $failed
