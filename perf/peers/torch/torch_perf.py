#!/usr/bin/python3
"""torch-perf: torch.distributed.all_reduce timed as strata-perf times the library's, on
a torch backend (strata or gloo), with strata-perf's --json output, so perf/compare puts
PyTorch on Strata beside PyTorch on Gloo and beside strata-perf itself (what the Python
binding costs). Under strata-run (strata.torch fills in torch's env:// variables):

  PYTHONPATH=build/python build/bin/strata-run -n 2 /usr/bin/python3 perf/peers/torch/torch_perf.py \\
      all_reduce -b 8 -e 64M -f 2 --backend strata --json out.json

Method (perf/README.md): warmup at the largest and the smallest size; per size one untimed
call, a barrier, then -n blocking calls (dist.all_reduce with async_op=False, which
returns when the operation is complete) back to back, each on the next message-sized
slice of one buffer of the largest size; the time is the mean over ranks of time / n.
torch's all_reduce exists only in place: its figures fill both the in-place fields and the
out-of-place ones (perf/compare reads one or the other). busbw = algbw x 2(n-1)/n,
nccl-tests' all_reduce factor.
"""
import argparse
import json
import os
import time


def size_of(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("collective", choices=["all_reduce"])
    ap.add_argument("-b", default="8")
    ap.add_argument("-e", default="64M")
    ap.add_argument("-f", default="2")
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("-w", type=int, default=5)
    ap.add_argument("-d", default="float", choices=["float"])
    ap.add_argument("-c", default="0", help="accepted for perf/compare's command line; results are not checked")
    ap.add_argument("-I", default="0", help="accepted for perf/compare's command line; torch's all_reduce is in place")
    ap.add_argument("--backend", default=os.environ.get("TORCH_PERF_BACKEND", "strata"))
    ap.add_argument("--json", default="")
    a = ap.parse_args()

    import torch
    import torch.distributed as dist

    import strata.torch  # noqa: F401  the backend, and torch's env:// variables under strata-run

    torch.set_num_threads(1)
    dist.init_process_group(a.backend)
    rank, n = dist.get_rank(), dist.get_world_size()
    lo, hi, factor = size_of(a.b), size_of(a.e), int(a.f)
    sizes = []
    s = lo
    while s <= hi:
        sizes.append(s)
        s = s * factor if factor > 1 else s + (1 << 20)
    buf = torch.zeros(hi // 4)

    def timed(count, iters):
        steps = max(1, (hi // 4) // max(count, 1))
        t0 = time.perf_counter()
        for i in range(iters):
            at = count * (i % steps)
            dist.all_reduce(buf[at:at + count])
        return (time.perf_counter() - t0) / max(iters, 1)

    timed(hi // 4, a.w)
    timed(lo // 4, a.w)
    results = []
    for size in sizes:
        count = size // 4
        timed(count, 1)
        dist.barrier()
        mine = torch.tensor([timed(count, a.n)], dtype=torch.float64)
        dist.all_reduce(mine)
        seconds = mine.item() / n
        algbw = size / seconds / 1e9
        busbw = algbw * 2 * (n - 1) / n
        if rank == 0:
            print(f"{size:12d} {count:12d} float sum {seconds * 1e6:10.2f} us {algbw:7.3f} {busbw:7.3f}", flush=True)
        row = {"collective": "all_reduce", "size": size, "count": count, "type": "float", "op": "sum", "root": -1,
               "ranks": n}
        for side in ("oop_", "ip_"):
            row.update({side + "time_us": seconds * 1e6, side + "algbw": algbw, side + "busbw": busbw,
                        side + "wrong": None})
        results.append(row)
    if rank == 0 and a.json:
        with open(a.json, "w") as f:
            json.dump({"tool": "torch-perf", "backend": f"torch-{a.backend}", "collective": "all_reduce",
                       "ranks": n, "results": results}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
