#!/usr/bin/python3
"""Synchronous data parallel against DiLoCo on an emulated two-island cluster.

Runs strata-train under `strata-run -n RANKS --hosts 2 --link-rate RATE` once per
configuration (same model, global batch, steps and seed), reads the step and validation
lines, counts the bytes that cross the emulated link (the hosts' eth0 counters, read from
their network namespaces while the job runs: every byte on the slow link, TCP/IP headers
included), and writes DIR/diloco.json, DIR/diloco.md (the table) and DIR/diloco.png
(validation loss against tokens and against training wall-clock).

Root is needed (strata-run --hosts). Example (docs/training.md):
  perf/diloco_sweep.py --out docs/benchmarks --steps 1500
"""
import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))

CONFIGS = [  # name, extra strata-train flags
    ("sync DP", []),
    ("DiLoCo H=50 fp32", ["--diloco-h", "50"]),
    ("DiLoCo H=50 int8", ["--diloco-h", "50", "--outer-dtype", "int8"]),
    ("DiLoCo H=50 fp4", ["--diloco-h", "50", "--outer-dtype", "fp4"]),
    ("DiLoCo H=100 fp32", ["--diloco-h", "100"]),
    ("DiLoCo H=100 int8", ["--diloco-h", "100", "--outer-dtype", "int8"]),
    ("DiLoCo H=100 fp4", ["--diloco-h", "100", "--outer-dtype", "fp4"]),
    ("streaming H=100 F=4 tau=1 fp32", ["--diloco-h", "100", "--fragments", "4", "--overlap", "1"]),
    ("streaming H=100 F=4 tau=1 fp4", ["--diloco-h", "100", "--fragments", "4", "--overlap", "1",
                                        "--outer-dtype", "fp4"]),
    ("streaming H=100 F=4 tau=10 mix=0.5 fp4", ["--diloco-h", "100", "--fragments", "4", "--overlap", "10",
                                                 "--mix", "0.5", "--outer-dtype", "fp4"]),
]

STEP = re.compile(r"^\[0\] step +(\d+)/\d+ \| loss ([\d.]+) .*?\| +([\d.]+) ms")
VAL = re.compile(r"^\[0\] step +(\d+) \| val loss ([\d.]+)")
OUTER = re.compile(r"^\[0\] outer sync: ([\d.]+) outer steps .*?\| ([\d.]+) MB sent across islands by this rank, "
                   r"([\d.]+) MB by all \d+ \| exposed ([\d.]+) s")


def link_bytes(pid):
    """tx bytes of each emulated host's eth0 (strata-run names them strata-PID-h<i>)."""
    total = 0
    for h in (0, 1):
        try:
            out = subprocess.run(["ip", "netns", "exec", f"strata-{pid}-h{h}", "cat",
                                  "/sys/class/net/eth0/statistics/tx_bytes"],
                                 capture_output=True, text=True, timeout=5)
            total += int(out.stdout.strip())
        except (ValueError, subprocess.TimeoutExpired):
            return None
    return total


def run(name, extra, a):
    cmd = [os.path.join(a.build, "bin/strata-run"), "-n", str(a.ranks), "--hosts", "2", "--link-rate", a.link_rate,
           "--", os.path.join(a.build, "bin/strata-train"), "--data", os.path.join(ROOT, "data/tinyshakespeare.txt"),
           "--layers", "4", "--heads", "4", "--dim", "128", "--ctx", "64", "--batch", "16",
           "--steps", str(a.steps), "--dp", str(a.ranks), "--eval-every", str(a.eval_every), "--eval-batches", "16",
           "--sample-len", "0", "--log-every", "1"]
    if extra:
        cmd += ["--islands", "2"] + extra
    print(f"== {name}: {' '.join(cmd)}", flush=True)
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    last = [0]
    done = threading.Event()

    def poll():
        while not done.is_set():
            b = link_bytes(p.pid)
            if b is not None:
                last[0] = max(last[0], b)
            done.wait(0.5)

    th = threading.Thread(target=poll)
    th.start()
    out = p.communicate()[0]
    done.set()
    th.join()
    if p.returncode != 0:
        sys.exit(f"{name} failed:\n{out[-3000:]}")
    tokens_per_step = 16 * 64
    steps, vals, elapsed = [], [], 0.0
    for line in out.splitlines():
        m = STEP.match(line)
        if m:
            elapsed += float(m.group(3)) / 1e3
            steps.append((int(m.group(1)), float(m.group(2)), elapsed))
        m = VAL.match(line)
        if m:
            vals.append((int(m.group(1)), float(m.group(2)), elapsed))
    r = {"name": name, "flags": extra, "train_s": elapsed, "run_s": time.time() - t0, "link_bytes": last[0],
         "tokens_per_step": tokens_per_step, "val": vals, "loss": [(s, l) for s, l, _ in steps]}
    for line in out.splitlines():
        m = OUTER.match(line)
        if m:
            r.update(outer_steps=float(m.group(1)), outer_mb_rank=float(m.group(2)),
                     outer_mb_all=float(m.group(3)), exposed_s=float(m.group(4)))
    print(f"   train {elapsed:.1f} s, final val {vals[-1][1]:.4f}, link {last[0] / 1e6:.1f} MB", flush=True)
    return r


def time_to(r, target):
    """Training wall-clock at which r's validation loss first reaches `target` (linear
    between evaluations), or None."""
    prev = (0.0, None)
    for step, loss, t in r["val"]:
        if loss <= target:
            if prev[1] is None or prev[1] == loss:
                return t
            return prev[0] + (t - prev[0]) * (prev[1] - target) / (prev[1] - loss)
        prev = (t, loss)
    return None


def write_outputs(results, a):
    base = results[0]
    target = base["val"][-1][1]
    lines = [f"{a.ranks} ranks on 2 emulated hosts joined by {a.link_rate}; model 4 layers, 4 heads, dim 128, ctx 64 "
             f"(834,304 parameters); global batch 16 x 64 tokens; {a.steps} steps "
             f"({a.steps * 16 * 64 / 1e6:.2f} M tokens); validation every {a.eval_every} steps over 16 batches, "
             "of the global model for DiLoCo. Wall-clock: the sum of the step times (evaluation excluded). "
             "Speed-up: the time sync DP took to reach the run's final validation loss (interpolated between "
             "evaluations), divided by the run's time.", "",
             "| run | final val loss | vs sync DP | bytes on the slow link | fewer than sync DP | train wall-clock | "
             "sync DP to this loss | speed-up to equal loss | outer steps | exposed outer sync |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        v = r["val"][-1][1]
        t = time_to(base, v)
        exposed = (f"{r['exposed_s']:.1f} s ({r['exposed_s'] / r['outer_steps'] * 1e3:.0f} ms per outer step)"
                   if r.get("outer_steps") else "—")
        lines.append(
            f"| {r['name']} | {v:.4f} | {100 * (v - target) / target:+.1f}% | {r['link_bytes'] / 1e6:.1f} MB | "
            f"{base['link_bytes'] / max(r['link_bytes'], 1):.0f}x | {r['train_s']:.0f} s | "
            f"{'%.0f s' % t if t is not None else '—'} | {'%.1fx' % (t / r['train_s']) if t else '—'} | "
            f"{'%.0f' % r['outer_steps'] if r.get('outer_steps') else '—'} | {exposed} |")
    with open(os.path.join(a.out, "diloco.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(a.out, "diloco.json"), "w") as f:
        json.dump(results, f, indent=1)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5))
    for r in results:
        style = "k-" if r["name"] == "sync DP" else ("--" if "streaming" in r["name"] else "-")
        xs = [s * r["tokens_per_step"] / 1e6 for s, _, _ in r["val"]]
        ys = [l for _, l, _ in r["val"]]
        ts = [t for _, _, t in r["val"]]
        ax1.plot(xs, ys, style, label=r["name"], lw=1.4)
        ax2.plot(ts, ys, style, label=r["name"], lw=1.4)
    ax1.set_xlabel("tokens (M)")
    ax2.set_xlabel(f"training wall-clock (s), {a.link_rate} between the islands")
    for ax in (ax1, ax2):
        ax.set_ylabel("validation loss")
        ax.set_ylim(top=min(3.0, ax.get_ylim()[1]))
        ax.grid(alpha=0.3)
    ax2.set_xscale("log")
    ax1.legend(fontsize=8)
    fig.suptitle("strata-train: synchronous data parallel vs DiLoCo, 2 islands x 2 ranks")
    fig.tight_layout()
    fig.savefig(os.path.join(a.out, "diloco.png"), dpi=110)
    print("\n".join(lines))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "docs/benchmarks"))
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--link-rate", default="100mbit")
    ap.add_argument("--only", help="comma-separated run names (default: all)")
    ap.add_argument("--reverse", action="store_true", help="run the configurations in reverse order")
    ap.add_argument("--replot", action="store_true", help="redraw from DIR/diloco.json")
    a = ap.parse_args()
    if a.replot:
        with open(os.path.join(a.out, "diloco.json")) as f:
            return write_outputs(json.load(f), a)
    configs = [c for c in CONFIGS if not a.only or c[0] in a.only.split(",")]
    order = list(reversed(configs)) if a.reverse else configs
    by_name = {name: run(name, extra, a) for name, extra in order}
    results = [by_name[name] for name, _ in configs]  # sync DP first: the baseline
    write_outputs(results, a)


if __name__ == "__main__":
    main()
