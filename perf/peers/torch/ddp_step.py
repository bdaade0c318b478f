#!/usr/bin/python3
"""DDP step time of strata-train's GPT (its PyTorch twin) on the strata and gloo backends,
interleaved, median of --repeat runs (each run: the median step of --steps after warmup):

  perf/peers/torch/ddp_step.py --ranks 2 --repeat 5 -- --layers 4 --heads 4 --dim 128 --ctx 64 --batch 16

Arguments after -- go to tests/torch/ddp_train.py (the model and batch). Ranks run under
strata-run with one torch thread each; a step is forward, backward (DDP's bucketed
all_reduce overlapping it) and the optimizer.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--backends", default="strata,gloo")
    ap.add_argument("train", nargs="*", help="ddp_train.py arguments (after --)")
    a = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "build", "python"), OMP_NUM_THREADS="1")
    run = [os.path.join(ROOT, "build", "bin", "strata-run"), "-n", str(a.ranks), "--no-prefix", "--",
           sys.executable, os.path.join(ROOT, "tests", "torch", "ddp_train.py"), "--time"] + a.train
    backends = a.backends.split(",")
    times = {b: [] for b in backends}
    params = ""
    for _ in range(a.repeat):
        for b in backends:
            p = subprocess.run(run + ["--backend", b], env=env, capture_output=True, text=True)
            m = re.search(r"ddp_step \S+ ranks \d+ params (\d+) median_ms ([\d.]+)", p.stdout)
            if p.returncode or not m:
                sys.exit(f"{b} failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
            params = m.group(1)
            times[b].append(float(m.group(2)))
    med = {b: statistics.median(t) for b, t in times.items()}
    print(f"DDP step, {a.ranks} ranks, {params} parameters ({' '.join(a.train)}): median of {a.repeat} runs")
    for b in backends:
        print(f"  {b:7} {med[b]:8.2f} ms   runs: {', '.join(f'{t:.2f}' for t in times[b])}")
    if len(backends) == 2:
        print(f"  {backends[1]}/{backends[0]}: {med[backends[1]] / med[backends[0]]:.2f}")


if __name__ == "__main__":
    main()
