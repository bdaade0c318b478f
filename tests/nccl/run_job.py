#!/usr/bin/env python3
"""Runs one NCCL test program on N ranks under a launcher and checks its verdict.

    run_job.py strata-run|mpirun -n N --strata-run PATH [--timeout S] [--expect REGEX]...
               -- PROGRAM [ARGS...]

Every "{id}" in ARGS becomes a fresh file path for rank 0's unique id. The job passes when
it exits 0 within the timeout, each of the N ranks printed "... rank R: K checks, 0
failed", and the output matches every --expect. Exit 77 (ctest's skip) when mpirun is
asked for and not installed.
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile


def run(launcher, n, strata_run, timeout, expect, command):
    """Runs `command` on n ranks; returns 0 when it passed (see the module's doc)."""
    env = dict(os.environ)
    if launcher == "mpirun":
        if not shutil.which("mpirun"):
            print("skipped: mpirun is not installed (Debian: openmpi-bin)")
            return 77
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        prefix = ["mpirun", "-np", str(n), "--oversubscribe", "--bind-to", "none"]
    else:
        prefix = [strata_run, "-n", str(n), "--"]
    with tempfile.TemporaryDirectory(prefix="strata-nccl-") as tmp:
        argv = prefix + [c.replace("{id}", os.path.join(tmp, "id")) for c in command]
        print("$", " ".join(argv), flush=True)
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                             env=env, start_new_session=True)
        try:
            out = p.communicate(timeout=timeout)[0]
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out = p.communicate()[0]
            print(out[-8000:])
            print("FAILED: no end within %.0f s (a hang)" % timeout)
            return 1
    print(out[-8000:])
    verdicts = re.findall(r"rank (\d+): (\d+) checks, (\d+) failed", out)
    ranks = sorted(int(r) for r, _, _ in verdicts)
    if p.returncode != 0:
        print("FAILED: exit status %d" % p.returncode)
        return 1
    if ranks != list(range(n)):
        print("FAILED: verdicts from ranks %s, expected 0..%d" % (ranks, n - 1))
        return 1
    if any(int(f) for _, _, f in verdicts) or any(int(k) == 0 for _, k, _ in verdicts):
        print("FAILED: a rank failed checks, or ran none")
        return 1
    for pattern in expect:
        if not re.search(pattern, out):
            print("FAILED: nothing in the output matches %r" % pattern)
            return 1
    print("passed: %d ranks, %d checks" % (n, sum(int(k) for _, k, _ in verdicts)))
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("launcher", choices=["strata-run", "mpirun"])
    ap.add_argument("-n", type=int, required=True)
    ap.add_argument("--strata-run", required=True)
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--expect", action="append", default=[])
    argv = sys.argv[1:]
    if "--" not in argv:
        ap.error("the program to run follows --")
    cut = argv.index("--")
    a = ap.parse_args(argv[:cut])
    return run(a.launcher, a.n, a.strata_run, a.timeout, a.expect, argv[cut + 1:])


if __name__ == "__main__":
    sys.exit(main())
