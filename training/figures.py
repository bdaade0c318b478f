#!/usr/bin/env python3
"""Figures of strata-train's model parallelism (docs/training.md), printed as tables.

    training/figures.py bubble    pipeline idle per step against (P-1)/(M+P-1), and /V interleaved
    training/figures.py memory    peak activation memory per stage, GPipe against 1F1B
    training/figures.py traffic   bytes per step per group against the formulas
    training/figures.py cluster   tokens/s on an emulated 2-host cluster at 1 Gbit/s (root)
    training/figures.py islands   DiLoCo with --on-failure continue: an island killed, then replaced;
                                  the loss curve beside an uninterrupted run (docs/benchmarks/islands.png)
    training/figures.py zero      dp 4, 8 layers x 512: memory per rank for ZeRO 0-3 and --recompute block
                                  against the formulas, and tokens/s of each relative to ZeRO-2
    training/figures.py recompute one process, 8 layers x 512: a step with --recompute block against one without
    training/figures.py capacity  the most layers (at width 512, dp 4) that train in 2 GB per rank, with
                                  ZeRO-0 and with ZeRO-3 + --recompute block, checked by a run's peak RSS
    training/figures.py depth     ZeRO-3's model states against ZeRO-0's as layers are added (8-24 x 512)

Run from the repository root after tools/build. Each measurement is repeated (--reps) and
the median reported (5 by default); the machine's load is printed with it.
"""
import argparse
import os
import re
import resource
import statistics
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
TRAIN = os.path.join(ROOT, "build/bin/strata-train")
RUN = os.path.join(ROOT, "build/bin/strata-run")
DATA = os.path.join(ROOT, "data/tinyshakespeare.txt")


CPU_S = [0.0]  # CPU seconds (user + system) of the last train(): strata-run and its ranks


def train(ranks, args, hosts=0, link_rate=None):
    cmd = [RUN, "-n", str(ranks)]
    if hosts:
        cmd += ["--hosts", str(hosts)] + (["--link-rate", link_rate] if link_rate else [])
    cmd += ["--", TRAIN, "--data", DATA, "--eval-batches", "0", "--sample-len", "0", "--threads", "1"] + args
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU_S[0] = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    if out.returncode != 0:
        sys.exit("failed: " + " ".join(cmd) + "\n" + out.stdout[-3000:] + out.stderr[-3000:])
    return out.stdout


def rank_lines(out):
    """Per rank: (stage, peak activation MB, microbatches in flight, idle %)."""
    ranks = {}
    for m in re.finditer(r"\[(\d+)\] rank \d+ parameter checksum \S+ \| tp (\d+) pp (\d+) dp (\d+) \| replicated \S+ "
                         r"\| peak activations ([\d.]+) MB \((\d+) microbatches\) \| idle ([\d.]+)% of the step", out):
        ranks[int(m.group(1))] = dict(tp=int(m.group(2)), pp=int(m.group(3)), dp=int(m.group(4)),
                                      mb=float(m.group(5)), in_flight=int(m.group(6)), idle=float(m.group(7)))
    return ranks


def load():
    return open("/proc/loadavg").read().split()[0]


def bubble(reps):
    model = ["--layers", "8", "--heads", "8", "--dim", "256", "--ctx", "64", "--steps", "12", "--log-every", "100",
             "--pp", "2"]
    cases = [(sched, M) for sched in ["gpipe", "1f1b", "interleaved"] for M in [4, 8, 16]]
    print("pipeline idle per step, 2 stages, 4 layers each (dim 256, ctx 64), one sequence per microbatch, "
          f"steps 2-12; {reps} rounds over all cases, median; load average at start {load()}", flush=True)
    idle = {c: {0: [], 1: []} for c in cases}
    for _ in range(reps):  # rounds, so that every case sees the machine's load alike
        for sched, M in cases:
            r = rank_lines(train(2, model + ["--batch", str(M), "--microbatches", str(M), "--schedule", sched]))
            for v in r.values():
                idle[(sched, M)][v["pp"]].append(v["idle"])
    print("| schedule | M | formula | stage 0 | stage 1 | mean of stages |")
    print("|---|---|---|---|---|---|")
    for sched, M in cases:
        V = 2 if sched == "interleaved" else 1
        formula = 100 * (2 - 1) / (V * M + 2 - 1)
        s0, s1 = (statistics.median(idle[(sched, M)][p]) for p in (0, 1))
        print(f"| {sched} | {M} | {formula:.1f}% | {s0:.1f}% | {s1:.1f}% | {(s0 + s1) / 2:.1f}% |")
    print(f"load average at the end {load()}")


def memory(reps):
    del reps  # deterministic
    print("peak activation memory per stage: 8 layers, dim 128, ctx 64, 8 microbatches of 2 sequences")
    print("| P | schedule | stage: MB (microbatches in flight) |")
    print("|---|---|---|")
    for P in [2, 4]:
        for sched in ["gpipe", "1f1b", "interleaved"]:
            r = rank_lines(train(P, ["--layers", "8", "--heads", "4", "--dim", "128", "--ctx", "64", "--batch", "16",
                                     "--steps", "2", "--pp", str(P), "--microbatches", "8", "--schedule", sched]))
            cells = ", ".join(f"{v['pp']}: {v['mb']:.1f} ({v['in_flight']})" for v in sorted(r.values(), key=lambda v: v["pp"]))
            print(f"| {P} | {sched} | {cells} |", flush=True)


def traffic(reps):
    del reps  # deterministic
    base = ["--layers", "4", "--heads", "4", "--dim", "128", "--ctx", "64", "--batch", "16", "--steps", "2"]
    for ranks, flags in [(2, "--tp 2"), (2, "--tp 2 --sequence-parallel"), (2, "--pp 2 --microbatches 4"),
                         (8, "--tp 2 --pp 2 --dp 2 --zero 1 --microbatches 4 --sequence-parallel")]:
        out = train(ranks, base + flags.split())
        print(f"\n{ranks} ranks, {flags} (rank 0):")
        block = out[out.index("[0] bytes per step"):].splitlines()
        for line in block[:6]:
            if line.startswith("[0]   ") or "bytes per step" in line:
                print("   ", line[4:])


def cluster(reps):
    base = ["--layers", "4", "--heads", "4", "--dim", "128", "--ctx", "64", "--batch", "16", "--steps", "20",
            "--log-every", "100"]
    configs = [("dp 4", "--dp 4"), ("tp 2 x dp 2", "--tp 2 --dp 2"), ("pp 2 x dp 2", "--pp 2 --dp 2 --microbatches 4"),
               ("tp 2 x dp 2, TP across the link", "--tp 2 --dp 2 --layout dp,tp,pp"),
               ("pp 2 x dp 2, PP across the link", "--pp 2 --dp 2 --microbatches 4 --layout dp,pp,tp")]
    print(f"4 ranks on 2 emulated hosts, 1 Gbit/s between them; 20 steps of 16 x 64 tokens; {reps} rounds over "
          f"all layouts, median; load average at start {load()}", flush=True)
    results = {name: [] for name, _ in configs}
    for _ in range(reps):  # rounds, so that every layout sees the machine's load alike
        for name, flags in configs:
            out = train(4, base + flags.split(), hosts=2, link_rate="1gbit")
            m = re.search(r"done: .*\(([\d.]+) ms/step, (\d+) tok/s\).*per step from step \d+: compute ([\d.]+), "
                          r"comm ([\d.]+), idle ([\d.]+) ms", out)
            groups = "; ".join(l[len("[0]"):].split("groups of")[0].strip() + " " + l.split("--")[-1].strip()
                               for l in out.splitlines() if "groups of" in l and l.startswith("[0]"))
            results[name].append((int(m.group(2)), m.group(1), m.group(3), m.group(4), m.group(5), groups))
    print("| layout | groups | tok/s (median) | runs | ms/step | compute / comm / idle ms (median run, from step 2) |")
    print("|---|---|---|---|---|---|")
    for name, _ in configs:
        runs = sorted(results[name])
        med = runs[len(runs) // 2]
        print(f"| {name} | {med[5]} | {med[0]} | {', '.join(str(r[0]) for r in runs)} | {med[1]} | "
              f"{med[2]} / {med[3]} / {med[4]} |")
    print(f"load average at the end {load()}")


def losses(out):
    """Island 0's training loss and the validation loss by step, from rank 0's output (the last value printed)."""
    train_loss, val = {}, {}
    for m in re.finditer(r"^(?:\[\d+\] )?step +(\d+)/\d+ \| loss ([\d.]+)", out, re.M):
        train_loss[int(m.group(1))] = float(m.group(2))
    for m in re.finditer(r"^(?:\[\d+\] )?step +(\d+) \| val loss ([\d.]+)", out, re.M):
        val[int(m.group(1))] = float(m.group(2))
    return train_loss, val


def islands(reps):
    """3 islands of 2 ranks; rank 2 (island 1) is SIGKILLed after step `kill`, its two ranks are started again with
    --join after step `back`. The ranks are spawned directly (strata-run would stop the survivors), with the
    variables strata-run would give them."""
    import signal
    import socket
    import time
    steps, H, kill, back = 300, 10, 100, 150
    model = ["--data", DATA, "--layers", "2", "--heads", "4", "--dim", "64", "--ctx", "32", "--batch", "12",
             "--steps", str(steps), "--warmup", "20", "--lr", "1e-3", "--eval-every", "25", "--eval-batches", "4",
             "--sample-len", "0", "--threads", "1", "--diloco-h", str(H), "--islands", "3"]
    print(f"3 islands of 2 ranks, H {H}, {steps} steps; kill rank 2 after step {kill}, restart island 1 after step "
          f"{back}; {reps} runs; load average at start {load()}", flush=True)
    whole = subprocess.run([RUN, "-n", "6", "--", TRAIN] + model, capture_output=True, text=True, timeout=900)
    if whole.returncode != 0:
        sys.exit("the uninterrupted run failed:\n" + whole.stdout[-3000:])
    ref_train, ref_val = losses(whole.stdout)
    rows = []
    for rep in range(reps):
        with socket.socket() as s:  # a free port for rank 0's root, as strata-run picks one
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        secret = os.urandom(16).hex()

        def spawn(rank, extra=()):
            env = dict(os.environ, STRATA_RANK=str(rank), STRATA_WORLD_SIZE="6", STRATA_ROOT=f"127.0.0.1:{port}",
                       STRATA_SECRET=secret, STRATA_TIMEOUT="60")
            # Rank 0 prints the run; the others' output is not read (a full pipe would stop them).
            out = subprocess.PIPE if rank == 0 else subprocess.DEVNULL
            return subprocess.Popen([TRAIN] + model + ["--on-failure", "continue"] + list(extra), env=env,
                                    stdout=out, stderr=subprocess.STDOUT, text=True)
        ranks = [spawn(r) for r in range(6)]
        out0, events = "", {}
        t_kill = None
        for line in ranks[0].stdout:  # rank 0 prints: follow it to time the kill and the replacement
            out0 += line
            now = time.monotonic()
            if t_kill is None and line.startswith(f"step {kill:5d}/"):
                ranks[2].send_signal(signal.SIGKILL)
                t_kill = now
            elif "came back" in line:
                events["came back"] = line.strip()
            elif "stopped (" in line:
                events["went on"] = (now - t_kill, line.strip())
            elif line.startswith(f"step {back:5d}/") and len(ranks) == 6:
                ranks += [spawn(r, ["--join"]) for r in (2, 3)]
        for p in ranks:
            p.wait(timeout=300)
        train_loss, val = losses(out0)
        went = events.get("went on", (float("nan"), ""))
        came = events.get("came back", "")
        heal = re.search(r"\(([\d.]+) MB in ([\d.]+) s\)", came)
        rows.append((went[0], float(heal.group(2)) if heal else float("nan"), float(heal.group(1)) if heal else 0,
                     val[steps], went[1], came))
        print(f"run {rep + 1}: kill to going on {went[0]:.2f} s | heal {came} | final val {val[steps]:.4f} "
              f"(uninterrupted {ref_val[steps]:.4f})", flush=True)
        if rep == 0:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
            fig, ax = plt.subplots(figsize=(8, 4.5))
            ax.plot(sorted(ref_train), [ref_train[k] for k in sorted(ref_train)], lw=0.8, color="tab:blue",
                    alpha=0.6, label="training loss (island 0), uninterrupted")
            ax.plot(sorted(train_loss), [train_loss[k] for k in sorted(train_loss)], lw=0.8, color="tab:red",
                    alpha=0.6, label="training loss (island 0), island 1 lost and replaced")
            ax.plot(sorted(ref_val), [ref_val[k] for k in sorted(ref_val)], "o-", color="tab:blue",
                    label="validation, uninterrupted")
            ax.plot(sorted(val), [val[k] for k in sorted(val)], "s--", color="tab:red",
                    label="validation, island 1 lost and replaced")
            low = min(min(ref_train.values()), min(train_loss.values()))
            ax.set_ylim(low - 0.1, 4.0)
            for at, what in ((kill, " island 1 killed"), (back, " replacement started")):
                ax.axvline(at, color="gray", ls=":")
                ax.text(at, low - 0.05, what, va="bottom", fontsize=8)
            ax.set_xlabel("step")
            ax.set_ylabel("loss")
            ax.set_title("DiLoCo, 3 islands of 2 ranks, H = 10: --on-failure continue, then --join")
            ax.legend(fontsize=8)
            fig.tight_layout()
            path = os.path.join(ROOT, "docs/benchmarks/islands.png")
            fig.savefig(path, dpi=110)
            print("wrote", path)
    med = lambda i: statistics.median(r[i] for r in rows)
    print(f"median of {reps}: kill to the islands going on {med(0):.2f} s, heal {med(1):.2f} s for {med(2):.2f} MB, "
          f"final validation {med(3):.4f} against uninterrupted {ref_val[steps]:.4f}; load average at the end {load()}")


ZERO_MODEL = ["--heads", "8", "--dim", "512", "--ctx", "64", "--batch", "16", "--threads", "1"]
ZERO_CASES = [("zero 0", "--zero 0"), ("zero 1", "--zero 1"), ("zero 2", "--zero 2"), ("zero 3", "--zero 3"),
              ("zero 3, --prefetch 0", "--zero 3 --prefetch 0"), ("zero 2, --recompute block", "--zero 2 --recompute block"),
              ("zero 3, --recompute block", "--zero 3 --recompute block")]
REPORT_ROWS = ["parameters", "gradients", "Adam moments m, v", "model states", "activations", "recomputation"]


def report(out):
    """Rank 0's memory report: MB per row, the model states' ZeRO formula and its MB, and Ψ."""
    rows = {}
    for name in REPORT_ROWS:
        m = re.search(r"\[0\]   " + re.escape(name) + r" +([\d.]+) MB", out)
        rows[name] = float(m.group(1)) if m else 0.0
    m = re.search(r"model states +[\d.]+ MB \| (\S+) += +([\d.]+) MB", out)
    rows["formula"], rows["formula MB"] = m.group(1), float(m.group(2))
    rows["psi"] = int(re.search(r"Ψ = (\d+) parameters", out).group(1))
    return rows


def step_ms(out):
    """Rank 0's median step time in ms, and its median exposed gather, over steps 2 on."""
    ms, gather = [], []
    for m in re.finditer(r"^\[0\] step +(\d+)/\d+ \|.*?\| +([\d.]+) ms(?: \(.*?(?:gather ([\d.]+))?\))?", out, re.M):
        if int(m.group(1)) >= 2:
            ms.append(float(m.group(2)))
            gather.append(float(m.group(3) or 0))
    return statistics.median(ms), statistics.median(gather)


def zero(reps):
    steps = 6
    tokens = 16 * 64
    print(f"dp 4 on 4 local ranks, 8 layers x 512 (8 heads, ctx 64), global batch 16 x 64, {steps} steps; each mode "
          f"run in turn with ZeRO-2, {reps} pairs, each run's median step from step 2; load average at start {load()}",
          flush=True)
    run = lambda flags: train(4, ["--layers", "8"] + ZERO_MODEL + ["--steps", str(steps), "--log-every", "1"] + flags.split())
    mem, ms, ratio, gather, cpu, cpu_ratio = {}, {}, {}, {}, {}, {}
    for name, flags in ZERO_CASES:
        if name == "zero 2":
            continue
        ms[name], ratio[name], gather[name], cpu[name], cpu_ratio[name] = [], [], [], [], []
        for _ in range(reps):  # pairs: the mode, then ZeRO-2 right after it
            out = run(flags)
            c = CPU_S[0]
            base = run("--zero 2")
            c2 = CPU_S[0]
            mem[name], mem["zero 2"] = report(out), report(base)
            (t, g), (t2, _) = step_ms(out), step_ms(base)
            ms[name].append(t)
            gather[name].append(g)
            cpu[name].append(c)
            ms.setdefault("zero 2", []).append(t2)
            cpu.setdefault("zero 2", []).append(c2)
            ratio[name].append(t2 / t)
            cpu_ratio[name].append(c / c2)
        print(f"{name}: tok/s against ZeRO-2's " + ", ".join(f"{x:.2f}" for x in ratio[name]) + "; CPU seconds against "
              "ZeRO-2's " + ", ".join(f"{x:.2f}" for x in cpu_ratio[name]) + f" (load {load()})", flush=True)
    base = mem["zero 0"]["model states"]
    print(f"\nmemory per rank (rank 0's report, MB; Ψ = {mem['zero 0']['psi']:,})")
    print("| mode | parameters | gradients | Adam m, v | model states | ZeRO formula | states / zero 0 | activations "
          "per microbatch | recompute buffer |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, _ in ZERO_CASES:
        r = mem[name]
        print(f"| {name} | {r['parameters']:.2f} | {r['gradients']:.2f} | {r['Adam moments m, v']:.2f} | "
              f"{r['model states']:.2f} | {r['formula']} = {r['formula MB']:.2f} | {r['model states'] / base:.3f} | "
              f"{r['activations']:.2f} | {r['recomputation']:.2f} |")
    print("\ntime per step (rank 0's median step from step 2, median of the runs), and the CPU seconds of a whole run "
          "(4 ranks and strata-run, start-up included: the 4 ranks keep the 2 cores busy, so this is the work a step "
          "costs, whatever else the machine runs)")
    print("| mode | ms/step | tok/s | tok/s / ZeRO-2's (median of the pairs; all) | exposed gather ms | CPU s per run "
          "| CPU / ZeRO-2's (median of the pairs; all) |")
    print("|---|---|---|---|---|---|---|")
    ratios = lambda r: f"{statistics.median(r):.2f} ({', '.join(f'{x:.2f}' for x in r)})"
    for name, _ in ZERO_CASES:
        m = statistics.median(ms[name])
        r = ratios(ratio[name]) if name in ratio else "1"
        c = ratios(cpu_ratio[name]) if name in cpu_ratio else "1"
        g = f"{statistics.median(gather[name]):.0f}" if name in gather else "0"
        print(f"| {name} | {m:.0f} | {tokens / m * 1e3:.0f} | {r} | {g} | {statistics.median(cpu[name]):.0f} | {c} |")
    print(f"load average at the end {load()}")


def recompute(reps):
    """One process (a dp 4 rank's share of the batch, no communication): the cost of recomputing alone."""
    steps = 8
    args = ["--layers", "8", "--heads", "8", "--dim", "512", "--ctx", "64", "--batch", "4", "--steps", str(steps),
            "--log-every", "1", "--eval-batches", "0", "--sample-len", "0", "--threads", "1", "--data", DATA]
    print(f"one process, 8 layers x 512 (8 heads, ctx 64), batch 4 x 64, 1 BLAS thread, {steps} steps; --recompute "
          f"block and none in turn, {reps} pairs, each run's median step from step 2; load average at start {load()}",
          flush=True)
    ratios, none_ms, block_ms = [], [], []
    for _ in range(reps):
        ms = []
        for flag in ["block", "none"]:
            out = subprocess.run([TRAIN] + args + ["--recompute", flag], capture_output=True, text=True, timeout=900)
            steps_ms = [float(m.group(2)) for m in re.finditer(r"^step +(\d+)/\d+ \|.*?\| +([\d.]+) ms", out.stdout, re.M)
                        if int(m.group(1)) >= 2]
            ms.append(statistics.median(steps_ms))
        block_ms.append(ms[0])
        none_ms.append(ms[1])
        ratios.append(ms[0] / ms[1])
    print(f"| recompute | ms/step (median of runs) | step / none's (median of the pairs; all) |")
    print("|---|---|---|")
    print(f"| none | {statistics.median(none_ms):.0f} | 1 |")
    print(f"| block | {statistics.median(block_ms):.0f} | {statistics.median(ratios):.2f} "
          f"({', '.join(f'{x:.2f}' for x in ratios)}) |")
    print(f"load average at the end {load()}")


def startup_report(args):
    """The memory report of a 4-rank run, read as it starts; the run is then stopped (no step runs)."""
    cmd = [RUN, "-n", "4", "--", TRAIN, "--data", DATA, "--eval-batches", "0", "--sample-len", "0"] + args
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    out = ""
    for line in p.stdout:
        out += line
        if re.search(r"\[0\]   (activations|recomputation) ", line) and ("--recompute" not in args or "recomputation" in line):
            break
    os.killpg(p.pid, 15)
    p.wait()
    if "model states" not in out:
        sys.exit("no memory report: " + " ".join(cmd) + "\n" + out[-3000:])
    return report(out)


def capacity(reps):
    del reps  # one verifying run per mode
    budget = 2e9
    modes = [("zero 0", ["--zero", "0"]), ("zero 3, --recompute block", ["--zero", "3", "--recompute", "block"])]
    fixed = ZERO_MODEL + ["--steps", "1", "--log-every", "1"]
    print(f"dp 4 on 4 local ranks, width 512 (8 heads, ctx 64, global batch 16 x 64); the most layers whose allocated "
          f"model states, activations and recompute buffer fit {budget / 1e9:.0f} GB per rank less the process's own "
          f"memory (peak RSS of a 1-layer run less what it allocated), then one step of it run and its peak RSS read; "
          f"load average at start {load()}", flush=True)
    print("| mode | layers | parameters | allocated per rank (MB) | peak RSS rank 0 (MB) |")
    print("|---|---|---|---|---|")
    for name, flags in modes:
        def allocated(layers):
            r = startup_report(["--layers", str(layers)] + fixed + flags)
            return (r["model states"] + r["activations"] + r["recomputation"]) * 1e6, r["psi"]
        small = train(4, ["--layers", "1"] + fixed + flags)
        own = float(re.search(r"peak RSS rank 0: ([\d.]+) MB", small).group(1)) * 1e6 - allocated(1)[0]
        # What a run allocates grows by the same bytes per layer (states, kept activations);
        # the buffers (gathered groups, staging, the recomputed block) stay: a line through
        # 4 and 8 layers, then the largest count under it that the report confirms.
        a4, a8 = allocated(4)[0], allocated(8)[0]
        lo = 4 + int((budget - own - a4) / ((a8 - a4) / 4))
        while allocated(lo)[0] + own > budget:
            lo -= 1
        need, psi = allocated(lo)
        out = train(4, ["--layers", str(lo)] + fixed + flags)
        rss = float(re.search(r"peak RSS rank 0: ([\d.]+) MB", out).group(1))
        print(f"| {name} | {lo} | {psi / 1e6:.1f} M | {need / 1e6:.0f} (+ {own / 1e6:.0f} the process's own) | "
              f"{rss:.0f} |", flush=True)
    print(f"load average at the end {load()}")


def depth(reps):
    """ZeRO-3's model states against ZeRO-0's 16Ψ as layers are added: its working buffers stay the same size."""
    del reps  # the start-up report is deterministic
    print("dp 4 on 4 local ranks, width 512 (8 heads, ctx 64, global batch 16 x 64); rank 0's start-up report, MB")
    print("| layers | --prefetch | Ψ | ZeRO-3 model states | ZeRO-0's 16Ψ | ratio |")
    print("|---|---|---|---|---|---|")
    for layers in (8, 12, 16, 24):
        for prefetch in ("1", "0"):
            r = startup_report(["--layers", str(layers)] + ZERO_MODEL + ["--zero", "3", "--prefetch", prefetch,
                                                                          "--steps", "1"])
            z0 = 16 * r["psi"] / 1e6
            print(f"| {layers} | {prefetch} | {r['psi']:,} | {r['model states']:.2f} | {z0:.2f} | "
                  f"{r['model states'] / z0:.3f} |", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("figure", choices=["bubble", "memory", "traffic", "cluster", "islands", "zero", "recompute",
                                      "capacity", "depth"])
    p.add_argument("--reps", type=int, default=5)
    a = p.parse_args()
    globals()[a.figure](a.reps)


if __name__ == "__main__":
    main()
