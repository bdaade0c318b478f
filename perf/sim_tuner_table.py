#!/usr/bin/python3
"""The tuner against strata-sim at scale: for each cluster, rank count, collective and size,
the algorithm the library's tuner picks beside the fastest one the simulator finds (every
algorithm simulated with `strata-sim --compare`), written into docs/simulator.md between
its tuner markers.

  perf/sim_tuner_table.py                    # the table of docs/simulator.md (~12 min of one core)
  perf/sim_tuner_table.py --ranks 1024 --no-doc
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs/simulator.md")
BEGIN, END = "<!-- tuner:begin -->", "<!-- tuner:end -->"
CLUSTERS = ["perf/sim/clusters/superpod-1k.cluster", "perf/sim/clusters/two-islands.cluster",
            "tests/sim/data/dgx2-pod.cluster"]
COLLECTIVES = ["all_reduce", "reduce_scatter", "all_gather"]
TOLERANCE = 0.10


def human(size):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size // scale} {unit}"
    return f"{size} B"


def compare(build, cluster, ranks, coll, lo, hi):
    with tempfile.NamedTemporaryFile(suffix=".json") as js:
        cmd = [f"{build}/bin/strata-sim", coll, "--cluster", os.path.join(ROOT, cluster), "--ranks", str(ranks),
               "-b", lo, "-e", hi, "-f", "4", "--compare", "--json", js.name]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"failed: {' '.join(cmd)}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
        return json.load(open(js.name))


def rows_of(result):
    out = []
    for r in result["rows"]:
        ran = [a for a in r["algorithms"] if "time_us" in a]
        fastest = min(ran, key=lambda a: a["time_us"])
        mine = next(a for a in r["algorithms"] if a["algorithm"] == r["tuner"])
        refused = [a["algorithm"] for a in r["algorithms"] if "refused" in a]
        out.append({"cluster": result["cluster"], "ranks": result["ranks"], "collective": r["collective"],
                    "size": r["size"], "tuner": r["tuner"], "tuner_us": mine.get("time_us"),
                    "predicted_us": r["tuner_predicted_us"], "runs_as": mine.get("runs_as"),
                    "fastest": fastest["algorithm"], "fastest_us": fastest["time_us"], "refused": refused})
    return out


def ratio(r):
    return r["tuner_us"] / r["fastest_us"] if r["tuner_us"] is not None else float("inf")


def cell(x):
    return "refused" if x is None else f"{x:.1f}"


def write_doc(rows, command):
    within = sum(ratio(r) <= 1 + TOLERANCE for r in rows)
    refused = sum(r["tuner_us"] is None for r in rows)
    lines = [BEGIN, "", f"`{command}`: for each row every algorithm that applies is simulated; the tuner's choice "
             "(as the library makes it on that cluster, `algorithms/choice.cpp`) beside the fastest. time in µs per "
             "call, simulated; predicted: the tuner's own figure for its choice; refused: algorithms the simulator "
             "does not build there (beyond its budget).", "",
             "| cluster | ranks | collective | size | tuner's choice | time | predicted | fastest | time | choice / fastest | refused |",
             "|---|---:|---|---:|---|---:|---:|---|---:|---:|---|"]
    for r in rows:
        mine = r["tuner_us"] is not None
        mark = "" if ratio(r) <= 1 + TOLERANCE else " **beyond 10%**" if mine else ""
        choice = r["tuner"] + (f" (runs as {r['runs_as']})" if r["runs_as"] and r["runs_as"] != r["tuner"] else "")
        lines.append(f"| {r['cluster']} | {r['ranks']} | {r['collective']} | {human(r['size'])} | {choice} | "
                     f"{cell(r['tuner_us'])} | {cell(r['predicted_us'])} | {r['fastest']} | {r['fastest_us']:.1f} | "
                     f"{f'{ratio(r):.2f}' if mine else '-'}{mark} | {', '.join(r['refused'])} |")
    lines += ["", f"{within} of {len(rows)} rows within {TOLERANCE:.0%} of the fastest simulated algorithm"
              f"{f'; in {refused} the simulator refused the tuner choice (below)' if refused else ''}.", "", END]
    doc = open(DOC).read()
    a, b = doc.index(BEGIN), doc.index(END) + len(END)
    open(DOC, "w").write(doc[:a] + "\n".join(lines) + doc[b:])
    return within


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--ranks", default="1024,16384", help="rank counts, comma-separated")
    ap.add_argument("--min", default="64K", help="smallest size (-b)")
    ap.add_argument("--max", default="1G", help="largest size (-e); sizes step by 4")
    ap.add_argument("--clusters", default=",".join(CLUSTERS), help="cluster files, comma-separated")
    ap.add_argument("--collectives", default=",".join(COLLECTIVES))
    ap.add_argument("--no-doc", action="store_true", help="print the table only")
    args = ap.parse_args()
    rows = []
    for cluster in args.clusters.split(","):
        for ranks in (int(x) for x in args.ranks.split(",")):
            for coll in args.collectives.split(","):
                for r in rows_of(compare(args.build, cluster, ranks, coll, args.min, args.max)):
                    rows.append(r)
                    print(f"{r['cluster']:12s} {r['ranks']:6d} {r['collective']:15s} {human(r['size']):>8s} "
                          f"tuner {r['tuner']:19s} {cell(r['tuner_us']):>12s} us (predicted "
                          f"{cell(r['predicted_us']):>12s})  fastest {r['fastest']:19s} "
                          f"{r['fastest_us']:12.1f} us  {ratio(r):6.2f}{'  BEYOND' if ratio(r) > 1 + TOLERANCE else ''}",
                          flush=True)
    within = sum(ratio(r) <= 1 + TOLERANCE for r in rows)
    print(f"{within} of {len(rows)} rows within {TOLERANCE:.0%}")
    if not args.no_doc:
        write_doc(rows, "perf/sim_tuner_table.py")
        print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
