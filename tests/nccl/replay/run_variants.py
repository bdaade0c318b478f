#!/usr/bin/env python3
"""Runs the replay of PyTorch's NCCL calls (replay.cpp) in each of its variants, one job
after another under strata-run, and prints one verdict line per variant:

    run_variants.py --replay PATH --strata-run PATH -n N [--deadline S] [VARIANT...]

Without variants, every variant the replay lists (`replay --list`). Exit status 1 when any
variant failed or hung (the replay names the step where it hung). The device backend is
STRATA_DEVICE's (emulated in CI; cuda from tools/gpu-check).
"""
import argparse
import io
import os
import subprocess
import sys
import time
from contextlib import redirect_stdout

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import run_job  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--replay", required=True)
    ap.add_argument("--strata-run", required=True)
    ap.add_argument("-n", type=int, default=2)
    ap.add_argument("--deadline", type=float, default=30, help="seconds each step may take")
    ap.add_argument("variants", nargs="*")
    a = ap.parse_args()
    variants = a.variants or subprocess.run([a.replay, "--list"], check=True, capture_output=True,
                                            text=True).stdout.split()
    failed = []
    for v in variants:
        log = io.StringIO()
        begin = time.monotonic()
        with redirect_stdout(log):
            rc = run_job.run("strata-run", a.n, a.strata_run, 4 * a.deadline + 30, [],
                             [a.replay, "{id}", v, "--deadline", str(a.deadline)])
        took = time.monotonic() - begin
        hung = "HUNG" in log.getvalue()
        print("replay %-22s %d ranks: %s (%.1f s)" % (v, a.n, "PASS" if rc == 0 else "HUNG" if hung else "FAIL", took),
              flush=True)
        if rc != 0:
            failed.append(v)
            print(log.getvalue()[-6000:], flush=True)
    if failed:
        print("replay: %d of %d variants failed: %s" % (len(failed), len(variants), " ".join(failed)))
        return 1
    print("replay: all %d variants passed on %d ranks" % (len(variants), a.n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
