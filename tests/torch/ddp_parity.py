#!/usr/bin/python3
"""DDP on strata against DDP on gloo and against one process: 20 steps of strata-train's
GPT (ddp_train.py) from one seed on 2 ranks under torchrun and on 4 ranks under
strata-run, with each backend. Every run's losses (the mean of the ranks' local losses,
i.e. the loss of the global batch) and final parameters must agree with the serial
run on the whole batch, within fp32 reduction-order error:

  |loss - serial| <= 1e-5 * |serial| per step, |param - serial| <= 1e-5 * (1 + max |serial param|)

(only the order of the gradient sums differs: a rank's gradient of its slice, averaged
over the ranks, is the gradient of the global batch). Prints the largest differences and
one verdict line; exit 1 on a mismatch or a failed run.

  ddp_parity.py                       # the four jobs above
  ddp_parity.py --jobs torchrun:2:strata
"""
import argparse
import os
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ddp_train  # noqa: E402
import launch  # noqa: E402

LOSS_TOL = 1e-5
PARAM_TOL = 1e-5
JOBS = ["torchrun:2:strata", "torchrun:2:gloo", "strata-run:4:strata", "strata-run:4:gloo"]


def compare(job, out, ref_losses, ref_params, n):
    ranks = [torch.load(os.path.join(out, f"rank{r}.pt")) for r in range(n)]
    losses = [sum(r["losses"][s] for r in ranks) / n for s in range(len(ref_losses))]
    dloss = max(abs(a - b) / abs(b) for a, b in zip(losses, ref_losses))
    params = ranks[0]["params"]
    scale = 1 + max(v.abs().max().item() for v in ref_params.values())
    dparam = max((params[k] - v).abs().max().item() for k, v in ref_params.items()) / scale
    ok = dloss <= LOSS_TOL and dparam <= PARAM_TOL
    print(f"{job}: losses {losses[0]:.4f} -> {losses[-1]:.4f}, max relative loss difference {dloss:.2e}, "
          f"max parameter difference {dparam:.2e} (scaled) {'ok' if ok else 'MISMATCH'}", flush=True)
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", default=",".join(JOBS), help="launcher:ranks:backend,...")
    ap.add_argument("--timeout", type=int, default=120)
    args, train_args = ap.parse_known_args()
    a = ddp_train.options(train_args)
    ref_losses, ref_params = ddp_train.serial(a)
    print(f"serial: losses {ref_losses[0]:.4f} -> {ref_losses[-1]:.4f} over {a.steps} steps", flush=True)
    good = True
    for job in args.jobs.split(","):
        launcher, n, backend = job.split(":")
        with tempfile.TemporaryDirectory() as out:
            status, text = launch.run(launcher, int(n), [os.path.join(HERE, "ddp_train.py"), "--backend", backend,
                                                         "--out", out] + train_args, args.timeout)
            if status != 0:
                print(text[-4000:])
                print(f"{job}: FAILED with status {status}")
                good = False
                continue
            good &= compare(job, out, ref_losses, ref_params, int(n))
    print("ddp_parity:", "PASS" if good else "FAIL")
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
