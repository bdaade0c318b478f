#!/usr/bin/env python3
"""The outer step of DiLoCo with PyTorch's own optimizer, for test_outer_sync.cpp.

Reads one trace per island (outer_sync_worker's files: the initial parameters, then per
outer step the island's parameters before and after the sync) and replays the outer
loop: the global parameters start as the initial ones; at each step the pseudo-gradient
is the mean over islands of (global - island's parameters before the sync), in island
order and float32, given to torch.optim.SGD(lr, momentum, nesterov) as the gradient of
the global parameters. Writes the global parameters after each step (float32).

usage: outer_reference.py N STEPS LR MOMENTUM NESTEROV OUT TRACE_ISLAND0 [TRACE_ISLAND1 ...]
"""
import sys

import numpy as np
import torch


def main():
    n, steps = int(sys.argv[1]), int(sys.argv[2])
    lr, momentum, nesterov = float(sys.argv[3]), float(sys.argv[4]), sys.argv[5] == "1"
    out, traces = sys.argv[6], sys.argv[7:]
    islands = []
    for path in traces:
        t = np.fromfile(path, dtype=np.float32)
        theta0 = t[:n]
        before = t[n:n + 2 * n * steps].reshape(steps, 2, n)[:, 0]
        islands.append((theta0, before))
    p = torch.nn.Parameter(torch.from_numpy(islands[0][0].copy()))
    opt = torch.optim.SGD([p], lr=lr, momentum=momentum, nesterov=nesterov)
    result = []
    for s in range(steps):
        with torch.no_grad():
            g = p.detach() - torch.from_numpy(islands[0][1][s].copy())
            for _, before in islands[1:]:
                g = g + (p.detach() - torch.from_numpy(before[s].copy()))
            g = g / len(islands)
        p.grad = g
        opt.step()
        result.append(p.detach().numpy().copy())
    np.stack(result).astype(np.float32).tofile(out)
    print(f"outer_reference: {len(islands)} islands, {steps} steps of torch.optim.SGD(lr={lr}, "
          f"momentum={momentum}, nesterov={nesterov}) with torch {torch.__version__}")


if __name__ == "__main__":
    main()
