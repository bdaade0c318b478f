#!/usr/bin/python3
"""DistributedDataParallel training of strata-train's GPT (its PyTorch twin,
training/reference/gpt_reference.py) on one torch.distributed backend. Run one process
per rank under a launcher (torchrun or strata-run):

  strata-run -n 4 -- /usr/bin/python3 tests/torch/ddp_train.py --backend strata --out DIR
  python3 -m torch.distributed.run --standalone --nproc_per_node 2 --redirects 1 --tee 1 \\
      --log_dir LOGS tests/torch/ddp_train.py --backend gloo --out DIR

Every step takes a global batch of --batch sequences of tinyshakespeare drawn from
--seed; rank r trains on its slice (rows r*B/n ...). Each rank writes DIR/rank<r>.pt:
its local losses, and on rank 0 the final parameters. With --time, rank 0 prints the
median step time instead (docs/benchmarks.md). serial() trains the same model on the
whole batch in one process: the reference ddp_parity.py compares the ranks' runs with.
"""
import argparse
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "training", "reference"))
from gpt_reference import GPT  # noqa: E402


def options(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="strata")
    ap.add_argument("--out", default="")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--ctx", type=int, default=32)
    ap.add_argument("--batch", type=int, default=8, help="global batch (sequences), a multiple of the ranks")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--time", action="store_true", help="print the median step time (rank 0)")
    ap.add_argument("--warmup", type=int, default=3, help="with --time: steps not timed")
    return ap.parse_args(argv)


def model_and_optimizer(a):
    torch.manual_seed(a.seed)
    model = GPT(256, a.ctx, a.layers, a.heads, a.dim)
    with torch.no_grad():  # GPT-2's initialisation, as strata-train's
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.02)
            elif name.endswith("bias"):
                p.zero_()
    return model, torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)


def batch(a, step, data):
    """The global batch of `step`: inputs and targets, [batch, ctx] each."""
    g = torch.Generator().manual_seed(a.seed * 1000003 + step)
    at = torch.randint(0, len(data) - a.ctx - 1, (a.batch,), generator=g)
    rows = torch.stack([data[i:i + a.ctx + 1] for i in at.tolist()])
    return rows[:, :-1].contiguous(), rows[:, 1:].contiguous()


def load_data():
    with open(os.path.join(ROOT, "data", "tinyshakespeare.txt"), "rb") as f:
        return torch.tensor(list(f.read()), dtype=torch.long)


def serial(a):
    """The same training in one process on the whole global batch: (losses, parameters)."""
    model, opt = model_and_optimizer(a)
    data, losses = load_data(), []
    for step in range(a.steps):
        x, y = batch(a, step, data)
        opt.zero_grad()
        loss = model(x, y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {k: v.detach().clone() for k, v in model.state_dict().items()}


def main():
    a = options()
    import strata.torch  # noqa: F401  the backend; under strata-run also torch's env:// variables
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)  # ranks share the machine's cores
    dist.init_process_group(a.backend)
    rank, n = dist.get_rank(), dist.get_world_size()
    if a.batch % n:
        sys.exit(f"--batch {a.batch} is not a multiple of {n} ranks")
    model, opt = model_and_optimizer(a)
    ddp = DDP(model)
    data, losses, times = load_data(), [], []
    mine = slice(rank * a.batch // n, (rank + 1) * a.batch // n)
    for step in range(a.steps):
        x, y = batch(a, step, data)
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = ddp(x[mine], y[mine])
        loss.backward()  # DDP averages the gradients over the ranks here
        opt.step()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    if a.out:
        result = {"losses": losses, "backend": a.backend, "ranks": n}
        if rank == 0:
            result["params"] = model.state_dict()
        torch.save(result, os.path.join(a.out, f"rank{rank}.pt"))
    if a.time and rank == 0:
        med = statistics.median(times[a.warmup:])
        params = sum(p.numel() for p in model.parameters())
        print(f"ddp_step {a.backend} ranks {n} params {params} median_ms {med * 1e3:.2f} "
              f"min_ms {min(times[a.warmup:]) * 1e3:.2f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
