#!/usr/bin/python3
"""Every call of the strata backend against a serial computation of what it must give,
on the ranks of one job (any launcher; ctest runs 3 ranks under strata-run):

  PYTHONPATH=build/python build/bin/strata-run -n 3 /usr/bin/python3 tests/torch/calls.py

Each rank builds every rank's inputs itself (they depend only on rank and a seed), so it
knows the expected result of each call. Covered: all_reduce with SUM, PRODUCT, MIN, MAX,
AVG on every dtype strata reduces, bool MIN/MAX, the coalesced forms of all_reduce and
all_gather, a non-contiguous tensor, async_op with wait/is_completed/get_future;
broadcast of a dtype strata cannot reduce (int16); reduce; all_gather (list and into one
tensor); reduce_scatter (list and tensor); all_to_all and all_to_all_single with uneven
splits; gather; scatter; send/recv, isend/irecv (8 MiB, both posting orders) and
batch_isend_irecv in a ring; barrier; a new_group sub-group; the clear errors for an
unsupported op and dtype; then init_process_group again with file:// and tcp://. Prints
one line per failed check and a verdict per rank; exit 1 on any failure.
"""
import os
import sys
import tempfile
import warnings

import torch
import torch.distributed as dist

import strata.torch  # noqa: F401

failures = []


def check(name, got, want, tol=0.0):
    got, want = torch.as_tensor(got), torch.as_tensor(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        failures.append(f"{name}: got {got.dtype} {tuple(got.shape)}, want {want.dtype} {tuple(want.shape)}")
        return
    if tol:
        bad = ~torch.isclose(got.double(), want.double(), rtol=tol, atol=tol)
    else:
        bad = got != want
    if bool(bad.any()):
        i = int(bad.flatten().nonzero()[0])
        failures.append(f"{name}: {int(bad.sum())} wrong, first at {i}: {got.flatten()[i].item()} "
                        f"!= {want.flatten()[i].item()}")


def raises(name, exc, fn, words):
    try:
        fn()
    except exc as e:
        if not all(w in str(e) for w in words):
            failures.append(f"{name}: raised {type(e).__name__} without {words}: {e}")
        return
    except Exception as e:  # noqa: BLE001
        failures.append(f"{name}: raised {type(e).__name__}, not {exc.__name__}: {e}")
        return
    failures.append(f"{name}: did not raise")


def data(rank, n=7, dtype=torch.float32, salt=0):
    """Small integers (exact in every dtype, sums and products included)."""
    g = torch.Generator().manual_seed(1000 * rank + salt)
    return torch.randint(1, 4, (n,), generator=g).to(dtype)


def main():
    warnings.filterwarnings("ignore", message=".*will be deprecated")  # the coalesced calls
    dist.init_process_group("strata")
    rank, n = dist.get_rank(), dist.get_world_size()
    everyone = range(n)

    # all_reduce: each op on each dtype strata reduces
    serial = {
        "SUM": lambda xs: torch.stack(xs).sum(0),
        "PRODUCT": lambda xs: torch.stack(xs).prod(0),
        "MIN": lambda xs: torch.stack(xs).min(0).values,
        "MAX": lambda xs: torch.stack(xs).max(0).values,
    }
    dtypes = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int32,
              torch.int64]
    for dtype in dtypes:
        for op, ref in serial.items():
            x = data(rank, dtype=dtype, salt=1)
            dist.all_reduce(x, op=getattr(dist.ReduceOp, op))
            wide = torch.float64 if dtype.is_floating_point else torch.int64  # integers wrap as they do on the ranks
            want = ref([data(r, dtype=dtype, salt=1).to(wide) for r in everyone]).to(dtype)
            check(f"all_reduce {op} {dtype}", x, want)
    x = data(rank, salt=2)
    dist.all_reduce(x, op=dist.ReduceOp.AVG)
    check("all_reduce AVG float32", x, torch.stack([data(r, salt=2) for r in everyone]).mean(0), tol=1e-6)
    b = torch.tensor([rank == 0, True, rank != 1])
    dist.all_reduce(b, op=dist.ReduceOp.MIN)
    check("all_reduce MIN bool", b, torch.tensor([n == 1, True, n == 1]))

    # coalesced: several tensors in one call
    a, b2 = data(rank, 5, salt=30), data(rank, 3, salt=31)
    dist.all_reduce_coalesced([a, b2])
    check("all_reduce_coalesced", torch.cat([a, b2]),
          torch.stack([torch.cat([data(r, 5, salt=30), data(r, 3, salt=31)]) for r in everyone]).sum(0))
    outs = [[torch.empty(5), torch.empty(3)] for _ in everyone]
    dist.all_gather_coalesced(outs, [data(rank, 5, salt=32), data(rank, 3, salt=33)])
    for r in everyone:
        check(f"all_gather_coalesced from rank {r}", torch.cat(outs[r]), torch.cat([data(r, 5, salt=32), data(r, 3, salt=33)]))

    # a non-contiguous tensor: every other column of a matrix
    m = torch.zeros(5, 6)
    m[:, ::2] = rank + 1
    col = m[:, ::2]
    dist.all_reduce(col)
    want_m = torch.zeros(5, 6)
    want_m[:, ::2] = n * (n + 1) / 2
    check("all_reduce non-contiguous", m, want_m)

    # async_op: wait, is_completed, get_future
    x = data(rank, 1 << 16, salt=3)
    work = dist.all_reduce(x, async_op=True)
    fut = work.get_future()
    work.wait()
    check("async all_reduce", x, torch.stack([data(r, 1 << 16, salt=3) for r in everyone]).sum(0))
    if not work.is_completed():
        failures.append("async all_reduce: is_completed() is False after wait()")
    check("async all_reduce future", fut.wait()[0], x)
    y = torch.ones(3)
    fut = dist.all_reduce(y, async_op=True).get_future().then(lambda f: f.value()[0] * 2)
    check("future.then", fut.wait(), torch.full((3,), 2.0 * n))

    # broadcast, any dtype (int16: strata cannot reduce it, but it moves it)
    for root in everyone:
        x = data(rank, salt=4).to(torch.int16)
        dist.broadcast(x, root)
        check(f"broadcast int16 root {root}", x, data(root, salt=4).to(torch.int16))

    # reduce
    root = n - 1
    x = data(rank, salt=5)
    dist.reduce(x, root, op=dist.ReduceOp.MAX)
    if rank == root:
        check("reduce MAX", x, torch.stack([data(r, salt=5) for r in everyone]).max(0).values)

    # all_gather: list form, and into one tensor
    outs = [torch.empty(7) for _ in everyone]
    dist.all_gather(outs, data(rank, salt=6))
    check("all_gather", torch.stack(outs), torch.stack([data(r, salt=6) for r in everyone]))
    flat = torch.empty(7 * n, dtype=torch.float64)
    dist.all_gather_into_tensor(flat, data(rank, dtype=torch.float64, salt=7)) if hasattr(
        dist, "all_gather_into_tensor") else dist._all_gather_base(flat, data(rank, dtype=torch.float64, salt=7))
    check("all_gather into one tensor", flat, torch.cat([data(r, dtype=torch.float64, salt=7) for r in everyone]))

    # reduce_scatter: list form, and from one tensor
    blocks = lambda r: [data(r, salt=10 + j) for j in everyone]  # noqa: E731
    out = torch.empty(7)
    dist.reduce_scatter(out, blocks(rank))
    check("reduce_scatter", out, torch.stack([blocks(r)[rank] for r in everyone]).sum(0))
    out = torch.empty(7, dtype=torch.int32)
    src = torch.cat(blocks(rank)).to(torch.int32)
    (dist.reduce_scatter_tensor if hasattr(dist, "reduce_scatter_tensor") else dist._reduce_scatter_base)(out, src)
    check("reduce_scatter from one tensor", out, torch.stack([blocks(r)[rank] for r in everyone]).sum(0).int())

    # all_to_all_single, uneven: rank r sends (r + j + 1) rows of 2 to rank j
    rows = lambda r, j: r + j + 1  # noqa: E731
    def chunk(r, j):
        return torch.full((rows(r, j), 2), float(100 * r + j))
    inp = torch.cat([chunk(rank, j) for j in everyone])
    out = torch.empty(sum(rows(j, rank) for j in everyone), 2)
    dist.all_to_all_single(out, inp, [rows(j, rank) for j in everyone], [rows(rank, j) for j in everyone])
    check("all_to_all_single uneven", out, torch.cat([chunk(j, rank) for j in everyone]))
    inp = torch.arange(4 * n, dtype=torch.float32) + 1000 * rank
    out = torch.empty_like(inp)
    dist.all_to_all_single(out, inp)
    check("all_to_all_single even", out,
          torch.cat([(torch.arange(4 * n, dtype=torch.float32) + 1000 * j)[4 * rank:4 * rank + 4] for j in everyone]))
    outs = [torch.empty(rows(j, rank)) for j in everyone]
    dist.all_to_all(outs, [torch.full((rows(rank, j),), float(10 * rank + j)) for j in everyone])
    check("all_to_all lists", torch.cat(outs), torch.cat([torch.full((rows(j, rank),), float(10 * j + rank))
                                                          for j in everyone]))

    # gather and scatter, root 1 where there is one
    root = 1 % n
    got = [torch.empty(7) for _ in everyone] if rank == root else None
    dist.gather(data(rank, salt=20), got, dst=root)
    if rank == root:
        check("gather", torch.stack(got), torch.stack([data(r, salt=20) for r in everyone]))
    out = torch.empty(7)
    dist.scatter(out, [data(j, salt=21) for j in everyone] if rank == root else None, src=root)
    check("scatter", out, data(rank, salt=21))

    # point-to-point in a ring: blocking, non-blocking, batched (1 MiB: beyond small-message paths)
    if n > 1:
        right, left = (rank + 1) % n, (rank - 1) % n
        big = lambda r: torch.arange(1 << 18, dtype=torch.float32) + r  # noqa: E731
        got = torch.empty(1 << 18)
        if rank % 2 == 0:
            dist.send(big(rank), right)
            dist.recv(got, left)
        else:
            dist.recv(got, left)
            dist.send(big(rank), right)
        check("send/recv ring", got, big(left))
        # unbatched, both posting orders, 8 MiB (beyond what a link buffers): no deadlock
        huge = lambda r: torch.arange(1 << 21, dtype=torch.float32) * (r + 1)  # noqa: E731
        for recv_first in (False, True):
            got = torch.empty(1 << 21)
            if recv_first:
                reqs = [dist.irecv(got, left), dist.isend(huge(rank), right)]
            else:
                reqs = [dist.isend(huge(rank), right), dist.irecv(got, left)]
            for q in reqs:
                q.wait()
            check(f"isend/irecv ring 8 MiB, {'receive' if recv_first else 'send'} posted first", got, huge(left))
        got = torch.empty(1 << 18)
        ops = [dist.P2POp(dist.isend, big(rank), right), dist.P2POp(dist.irecv, got, left)]
        for q in dist.batch_isend_irecv(ops):
            q.wait()
        check("batch_isend_irecv ring", got, big(left))
        # a receive posted before a collective does not hold the collective up
        late = torch.empty(3)
        req = dist.irecv(late, left)
        x = torch.ones(3)
        dist.all_reduce(x)
        dist.send(torch.full((3,), float(rank)), right)
        req.wait()
        check("irecv across a collective", late, torch.full((3,), float(left)))

    dist.barrier()

    # a sub-group of the even ranks
    evens = list(range(0, n, 2))
    g = dist.new_group(evens)
    if rank in evens:
        x = torch.tensor([float(rank)])
        dist.all_reduce(x, group=g)
        check("new_group all_reduce", x, torch.tensor([float(sum(evens))]))

    # clear errors, and the group still works after them
    raises("BAND", ValueError, lambda: dist.all_reduce(torch.ones(2, dtype=torch.int32), op=dist.ReduceOp.BAND),
           ["strata", "BAND"])
    raises("int16 sum", ValueError, lambda: dist.all_reduce(torch.ones(2, dtype=torch.int16)), ["strata", "Short"])
    raises("complex PRODUCT", Exception, lambda: dist.all_reduce(torch.ones(2, dtype=torch.complex64),
                                                                 op=dist.ReduceOp.PRODUCT), [])
    x = torch.ones(2)
    dist.all_reduce(x)
    check("all_reduce after refused calls", x, torch.full((2,), float(n)))

    dist.destroy_process_group()

    # the other init methods, with rank and world size given (this job's own store is gone)
    job = os.environ.get("STRATA_SECRET", str(os.getppid()))[:12]
    host = os.environ.get("MASTER_ADDR", "127.0.0.1")
    for method in (f"file://{tempfile.gettempdir()}/strata-calls-{job}", f"tcp://{host}:{os.environ['MASTER_PORT']}"):
        dist.init_process_group("strata", init_method=method, rank=rank, world_size=n)
        x = torch.full((3,), float(rank))
        dist.all_reduce(x)
        check(f"all_reduce after init_method {method.split(':')[0]}://", x, torch.full((3,), n * (n - 1) / 2))
        dist.destroy_process_group()
    for f in failures:
        print(f"rank {rank}: FAIL {f}")
    print(f"calls: rank {rank} of {n}: {'PASS' if not failures else f'FAIL ({len(failures)} checks)'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
