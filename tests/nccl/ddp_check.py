#!/usr/bin/env python3
"""PyTorch's ProcessGroupNCCL (backend "nccl") over Strata's libnccl.so.2, for a machine
with a GPU (gpu_checks.sh runs it): two ranks on cuda:0 train a small model with
DistributedDataParallel, each on half of a batch; the mean of their losses at every step
equals one process's loss on the whole batch, and their parameters equal its parameters
at the end (fp32, relative 1e-5: only the order of the gradient sums differs).

    ddp_check.py --libnccl build/lib/nccl/libnccl.so.2 [--steps 5]

The ranks start with LD_PRELOAD=<libnccl>: a library of that SONAME already loaded is the
one torch's libnccl.so.2 dependency resolves to; each rank checks /proc/self/maps to be
sure. NVIDIA's NCCL refuses two ranks on one GPU; Strata's does not. One verdict line;
exit 0 when everything is equal.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile

BATCH, IN, HIDDEN, OUT, LR = 8, 16, 32, 4, 0.1


def model_and_data(torch):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(IN, HIDDEN), torch.nn.Tanh(), torch.nn.Linear(HIDDEN, OUT))
    g = torch.Generator().manual_seed(1)
    return model, torch.randn(BATCH, IN, generator=g), torch.randn(BATCH, OUT, generator=g)


def train(torch, model, x, y, steps, after_loss=lambda loss: loss.item()):
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for _ in range(steps):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(after_loss(loss.detach()))
    return losses


def flat_params(torch, model):
    return torch.cat([p.detach().flatten() for p in model.parameters()]).cpu().tolist()


def rank_main(a):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=a.rank, world_size=2)
    maps = open("/proc/self/maps").read()
    ours = os.path.realpath(a.libnccl)
    if ours not in maps:
        raise SystemExit("rank %d: %s is not loaded; torch uses another libnccl.so.2" % (a.rank, ours))
    model, x, y = model_and_data(torch)
    ddp = DDP(model.cuda(), device_ids=[0])
    half = slice(a.rank * BATCH // 2, (a.rank + 1) * BATCH // 2)

    def mean_over_ranks(loss):
        dist.all_reduce(loss, op=dist.ReduceOp.AVG)
        return loss.item()

    losses = train(torch, ddp, x[half].cuda(), y[half].cuda(), a.steps, mean_over_ranks)
    result = {"losses": losses, "params": flat_params(torch, model), "nccl": list(torch.cuda.nccl.version())}
    with open(a.out, "w") as f:
        json.dump(result, f)
    dist.destroy_process_group()


def close(a, b, rel=1e-5):
    return all(abs(u - v) <= rel * max(1.0, abs(v)) for u, v in zip(a, b)) and len(a) == len(b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--libnccl", required=True)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--rank", type=int)
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.rank is not None:
        return rank_main(a)

    import torch
    model, x, y = model_and_data(torch)
    model = model.cuda()
    want_losses = train(torch, model, x.cuda(), y.cuda(), a.steps)
    want_params = flat_params(torch, model)

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # Ours first; what was preloaded already (tools/gpu-check's stack dumper) stays.
    preload = os.path.realpath(a.libnccl) + (":" + os.environ["LD_PRELOAD"] if os.environ.get("LD_PRELOAD") else "")
    env = dict(os.environ, LD_PRELOAD=preload, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    with tempfile.TemporaryDirectory() as tmp:
        outs = [os.path.join(tmp, "rank%d.json" % r) for r in range(2)]
        procs = [subprocess.Popen([sys.executable, __file__, "--libnccl", a.libnccl, "--steps", str(a.steps),
                                   "--rank", str(r), "--out", outs[r]], env=env) for r in range(2)]
        try:
            codes = [p.wait(timeout=150) for p in procs]
        except subprocess.TimeoutExpired:
            states = ["rank %d %s" % (r, "running" if p.poll() is None else "exited %s" % p.returncode)
                      for r, p in enumerate(procs)]
            for p in procs:
                p.kill()
            print("ddp_check: FAILED: after 150 s: %s" % ", ".join(states))
            return 1
        if any(codes):
            print("ddp_check: FAILED: the ranks exited with", codes)
            return 1
        results = [json.load(open(o)) for o in outs]
    ok = all(close(r["losses"], want_losses) and close(r["params"], want_params) for r in results)
    print("ddp_check: NCCL %s over %s; losses %s vs one process %s: %s" %
          (".".join(map(str, results[0]["nccl"])), a.libnccl, ["%.6f" % v for v in results[0]["losses"]],
           ["%.6f" % v for v in want_losses], "equal" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
