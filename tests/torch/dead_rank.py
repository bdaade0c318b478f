#!/usr/bin/python3
"""A rank that dies or stops in the middle of an all_reduce loop on the strata backend:
the other ranks' all_reduce must raise, naming it, within the group's timeout (never hang).

Three ranks run all_reduce of 1 MiB in a loop and check every result against its formula
(the sum of rank + 1 + iteration over the ranks). After a few iterations the victim (the
last rank) notes the time and kills itself with SIGKILL ("kill": the others must raise
at once) or stops itself with SIGSTOP ("stop": a live but stuck rank; the others must
raise after init_process_group's timeout, --timeout seconds, not STRATA_TIMEOUT's 300).
Each survivor writes what it raised and when. Jobs run under torchrun and strata-run:

  dead_rank.py                                  # torchrun:kill, strata-run:kill, strata-run:stop
  dead_rank.py --jobs torchrun:stop --timeout 5

Prints one line per survivor and a verdict; exit 1 when a survivor did not raise, raised
without naming the victim, or raised too late.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import launch  # noqa: E402

RANKS = 3
ITERATIONS_BEFORE = 5
KILL_LIMIT_S = 2.0  # a dead process's sockets close at once: far below any timeout


def worker(out, how, timeout):
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    import strata.torch  # noqa: F401

    dist.init_process_group("strata", timeout=timedelta(seconds=timeout))
    rank, n = dist.get_rank(), dist.get_world_size()
    victim = n - 1
    if rank != victim:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the launcher stops the job when the victim dies: report first
    x = torch.empty(1 << 18)
    i = 0
    try:
        while True:
            if rank == victim and i == ITERATIONS_BEFORE:
                with open(os.path.join(out, "victim.json"), "w") as f:
                    json.dump({"pid": os.getpid(), "t": time.time()}, f)
                os.kill(os.getpid(), signal.SIGKILL if how == "kill" else signal.SIGSTOP)
            x.fill_(rank + 1 + i)
            dist.all_reduce(x)
            want = n * (n + 1) / 2 + n * i
            if not bool((x == want).all()):
                raise AssertionError(f"iteration {i}: all_reduce gave {x[0].item()}, not {want}")
            i += 1
    except RuntimeError as e:
        t = time.time()
        with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
            json.dump({"error": str(e), "t": t, "iterations": i, "type": type(e).__name__}, f)
    os._exit(0)  # not destroy_process_group: the group has failed, and the victim never leaves


def run_job(launcher, how, timeout):
    """Returns (ok, lines)."""
    out = tempfile.mkdtemp(prefix="strata-dead-rank-")
    script = [os.path.abspath(__file__), "--worker", out, how, str(timeout)]
    job = subprocess.Popen(launch.command(launcher, RANKS, script, grace=30), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, start_new_session=True)
    files = [os.path.join(out, f"rank{r}.json") for r in range(RANKS - 1)]
    deadline = time.time() + 60 + timeout  # start-up on a loaded machine, then the timeout
    while time.time() < deadline and not all(os.path.exists(f) for f in files):
        if job.poll() is not None and not all(os.path.exists(f) for f in files):
            break
        time.sleep(0.2)
    victim = os.path.join(out, "victim.json")
    if os.path.exists(victim):
        try:
            os.kill(json.load(open(victim))["pid"], signal.SIGKILL)  # a stopped victim
        except ProcessLookupError:
            pass
    try:
        text, _ = job.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        text, _ = job.communicate()
    name = f"{launcher}:{how}"
    if not os.path.exists(victim):
        return False, [text[-3000:], f"{name}: the victim never reached iteration {ITERATIONS_BEFORE}"]
    t_victim = json.load(open(victim))["t"]
    ok, lines = True, []
    low, high = (0.0, KILL_LIMIT_S) if how == "kill" else (0.9 * timeout, timeout + 5.0)
    for r, f in enumerate(files):
        if not os.path.exists(f):
            ok = False
            lines.append(f"{name}: rank {r} did not raise (hung, or died otherwise)")
            continue
        got = json.load(open(f))
        dt = got["t"] - t_victim
        named = f"rank {RANKS - 1}" in got["error"]
        good = named and low <= dt <= high
        ok &= good
        lines.append(f"{name}: rank {r} raised {got['type']} {dt:.2f} s after the victim's {how} "
                     f"(expected {low:.1f}-{high:.1f} s){'' if named else ' WITHOUT naming rank ' + str(RANKS - 1)}: "
                     f"{got['error'][:200]} {'ok' if good else 'FAIL'}")
    if not ok:
        lines.insert(0, text[-3000:])
    return ok, lines


def main():
    if sys.argv[1:2] == ["--worker"]:
        out, how, timeout = sys.argv[2], sys.argv[3], float(sys.argv[4])
        return worker(out, how, timeout)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", default="torchrun:kill,strata-run:kill,strata-run:stop")
    ap.add_argument("--timeout", type=float, default=4.0, help="init_process_group's timeout, seconds")
    args = ap.parse_args()
    good = True
    for job in args.jobs.split(","):
        launcher, how = job.split(":")
        ok, lines = run_job(launcher, how, args.timeout)
        print("\n".join(lines), flush=True)
        good &= ok
    print("dead_rank:", "PASS" if good else "FAIL")
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
