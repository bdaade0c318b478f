#!/usr/bin/python3
"""Side-by-side sweep of every algorithm against the tuner's choice.

Runs strata-perf once per forced algorithm (STRATA_ALGO) and once with the tuner, each
`--repeat` times, and prints per size: the median time of each algorithm, the tuner's
choice and its time relative to the best forced one, and the tuner's predicted time
relative to the measured one (from the STRATA_DEBUG=INFO line of each call).

  perf/algo_sweep.py --ranks 4 --collective all_reduce -b 8 -e 64M -f 4
  perf/algo_sweep.py --launch "build/bin/strata-run -n 4 --hosts 2 --link-rate 1gbit" ...
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ALGOS = {
    "all_reduce": ["ring", "recursive_doubling", "direct", "hierarchical"],
    "reduce_scatter": ["ring", "direct", "hierarchical"],
    "all_gather": ["ring", "direct", "hierarchical"],
    "broadcast": ["ring", "tree", "hierarchical"],
    "reduce": ["ring", "tree", "hierarchical"],
}
PREDICTED = re.compile(r"STRATA INFO \w+: (\d+) x \S+ .*: (\w+) \(([^)]*)\), predicted ([0-9.]+) us")


def run(args, algo, env_extra):
    env = dict(os.environ, STRATA_DEBUG="INFO", **env_extra)
    if algo:
        env["STRATA_ALGO"] = algo
    else:
        env.pop("STRATA_ALGO", None)
    with tempfile.NamedTemporaryFile(suffix=".json") as js:
        cmd = args.launch.split() + ["--no-prefix", "--", args.perf, args.collective, "-b", args.b, "-e", args.e,
                                     "-f", args.f, "-n", str(args.iters), "-w", "2", "-c", "0", "--json", js.name]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"failed: {' '.join(cmd)}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
        data = json.load(open(js.name))
    times = {r["size"]: r["oop_time_us"] for r in data["results"]}
    counts = {r["count"]: r["size"] for r in data["results"]}
    chosen, predicted = {}, {}
    for line in p.stderr.splitlines():
        m = PREDICTED.search(line)
        if m and int(m.group(1)) in counts:
            size = counts[int(m.group(1))]
            chosen[size], predicted[size] = m.group(2), float(m.group(4))
    return times, chosen, predicted


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--collective", default="all_reduce", choices=sorted(ALGOS))
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--launch", help="launcher command (default: build/bin/strata-run -n RANKS)")
    ap.add_argument("--perf", default="build/bin/strata-perf")
    ap.add_argument("-b", default="8")
    ap.add_argument("-e", default="64M")
    ap.add_argument("-f", default="4")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--env", action="append", default=[], help="NAME=VALUE for every run")
    ap.add_argument("--algos", help="comma-separated subset of algorithms to force")
    args = ap.parse_args()
    args.launch = args.launch or f"build/bin/strata-run -n {args.ranks}"
    env_extra = dict(kv.split("=", 1) for kv in args.env)
    algos = args.algos.split(",") if args.algos else ALGOS[args.collective]

    runs = {a: [] for a in algos + ["tuner"]}
    for _ in range(args.repeat):  # interleaved, so slow phases of the machine hit every column
        for a in algos + ["tuner"]:
            runs[a].append(run(args, None if a == "tuner" else a, env_extra))
    sizes = sorted(runs["tuner"][0][0])
    med = {a: {s: statistics.median(r[0][s] for r in runs[a]) for s in sizes} for a in runs}
    print(f"# {args.collective}, {args.launch}, {' '.join(args.env)}; median of {args.repeat} runs, us per call")
    print(f"{'size':>10} " + " ".join(f"{a[:12]:>12}" for a in algos) +
          f" {'tuner':>10} {'choice':>18} {'vs best':>8} {'predicted':>10} {'pred/meas':>9}")
    worst = 1.0
    for s in sizes:
        best = min(med[a][s] for a in algos)
        tuned = med["tuner"][s]
        choice = runs["tuner"][0][1].get(s, "?")
        pred = runs["tuner"][0][2].get(s)
        worst = max(worst, tuned / best)
        print(f"{s:>10} " + " ".join(f"{med[a][s]:>12.1f}" for a in algos) +
              f" {tuned:>10.1f} {choice:>18} {tuned / best:>8.2f} " +
              (f"{pred:>10.1f} {pred / tuned:>9.2f}" if pred else f"{'-':>10} {'-':>9}"))
    print(f"# worst tuner/best ratio: {worst:.2f}")


if __name__ == "__main__":
    main()
