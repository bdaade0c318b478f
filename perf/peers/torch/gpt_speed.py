#!/usr/bin/python3
"""Training speed of strata-train's GPT in PyTorch (its twin, training/reference/
gpt_reference.py), eager or torch.compile, for the comparison with strata-train --device
cuda on the same GPU, model and batch (tests/training/gpu_checks.sh runs both):

  perf/peers/torch/gpt_speed.py --precision bf16 [--compile] --layers 12 --heads 12 --dim 768 \\
      --ctx 1024 --batch 8 --steps 30 --warmup 10

A step is strata-train's: forward, mean cross-entropy, backward, clipping to norm 1 and
AdamW (betas 0.9/0.95, eps 1e-8, weight decay 0.1 on matrices and embeddings) on fp32
parameters; --precision bf16 runs forward and backward under autocast(bfloat16), fp32
keeps TF32 off. The batch is --batch random windows of the data file's bytes. Prints one
line: tokens/s of the median timed step (after --warmup untimed ones; each step timed to a
synchronize), as strata-train's figure in gpu_checks.sh, and what ran. --device cuda with
a torch that has no CUDA, or --compile with one that has no torch.compile, is an error.
"""
import argparse
import os
import statistics
import sys
import time

import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
sys.path.insert(0, os.path.join(ROOT, "training", "reference"))
from gpt_reference import GPT  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=30, help="timed steps")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="bf16")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "tinyshakespeare.txt"))
    a = ap.parse_args()
    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        sys.exit(f"torch {torch.__version__} has no CUDA device: --device cuda cannot run")
    if a.compile and not hasattr(torch, "compile"):
        sys.exit(f"torch {torch.__version__} has no torch.compile (needs torch 2)")
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(1337)
    model = GPT(256, a.ctx, a.layers, a.heads, a.dim).to(dev)
    with torch.no_grad():  # GPT-2's scale (the speed does not depend on it)
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.02)
            elif name.endswith("bias"):
                p.zero_()
    params = model.canonical()
    opt = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
                             {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                            lr=1e-4, betas=(0.9, 0.95), eps=1e-8)
    step_model = torch.compile(model) if a.compile else model
    with open(a.data, "rb") as f:
        data = torch.tensor(list(f.read()), dtype=torch.long)

    def step():
        at = torch.randint(0, len(data) - a.ctx - 1, (a.batch,))
        rows = torch.stack([data[i:i + a.ctx + 1] for i in at.tolist()]).to(dev, non_blocking=True)
        x, y = rows[:, :-1].contiguous(), rows[:, 1:].contiguous()
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            loss = step_model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        return loss

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    for _ in range(a.warmup):
        step()
    sync()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        loss = step()
        sync()
        times.append(time.perf_counter() - t0)
    tokens = a.batch * a.ctx
    median = statistics.median(times)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    print(f"torch {torch.__version__} {'compile' if a.compile else 'eager'} {a.precision} on {name}: "
          f"{tokens / median:.0f} tok/s (median step {1e3 * median:.1f} ms of {len(times)}) | {a.layers} layers, "
          f"{a.heads} heads, dim {a.dim}, ctx {a.ctx}, batch {a.batch} "
          f"| last loss {loss.item():.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
