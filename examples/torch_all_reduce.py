#!/usr/bin/python3
"""torch.distributed on Strata: an unchanged torch script plus `import strata.torch`.

  PYTHONPATH=build/python build/bin/strata-run -n 4 /usr/bin/python3 examples/torch_all_reduce.py
  PYTHONPATH=build/python /usr/bin/python3 -m torch.distributed.run --standalone --nproc_per_node 4 \\
      --redirects 1 --tee 1 --log_dir /tmp/torchrun-logs examples/torch_all_reduce.py

Each rank all-reduces a vector whose elements are rank + index and checks the sum.
"""
import torch
import torch.distributed as dist

import strata.torch  # noqa: F401  registers the backend "strata"

dist.init_process_group("strata")
rank, n = dist.get_rank(), dist.get_world_size()
x = torch.arange(1 << 20, dtype=torch.float32) + rank
dist.all_reduce(x)
expected = n * torch.arange(1 << 20, dtype=torch.float32) + n * (n - 1) / 2
wrong = int((x != expected).sum())
print(f"rank {rank} of {n}: all_reduce of {x.numel()} floats {'passed' if wrong == 0 else 'FAILED'} ({wrong} wrong)")
dist.destroy_process_group()
raise SystemExit(1 if wrong else 0)
