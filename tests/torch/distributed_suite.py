#!/usr/bin/python3
"""PyTorch's own distributed test suite (torch/testing/_internal/distributed/
distributed_test.py, shipped with python3-torch) on a backend: strata or gloo.

It runs the suite as PyTorch's test_distributed_spawn.py does (each test spawns
WORLD_SIZE processes that meet through a file:// store), with the suite's plugin hook
declaring "strata" a third-party backend: DistTestCases.backend_feature["plugin"], plus
"ddp" (it runs DistributedDataParallel) and skip_collective["sendrecv anysource"] (it has
no receive from any source, like NCCL). Nothing else is changed.

  distributed_suite.py --backend strata                # the default subset (below)
  distributed_suite.py --backend gloo --all            # every test of the suite
  distributed_suite.py --backend strata -k all_reduce  # tests whose name matches a regex
  distributed_suite.py --list --all                    # names only

The default subset (for ctest, within its time budget) is chosen by name, not by what
passes: the tests named after a call the backend implements, `test_<call>...`, for
all_reduce, broadcast, reduce, all_gather, gather, scatter, reduce_scatter, send_recv,
isend, irecv and barrier, without those whose name says cuda, gpu, nccl, gloo, mpi,
complex, profil(er/ing), object, coalesced or group, and of those every 2nd in sorted
order (a fixed thinning that keeps each call represented). all_to_all and
batch_isend_irecv are not among the calls because the suite runs them on CPU for MPI or
gloo only. `--all` runs all of _DistTestBase.

Prints one line per test (PASS/SKIP/FAIL/ERROR and, for the last two, the first line
of the reason), then `distributed_suite: BACKEND pass P skip S fail F`, and exits 1 if F > 0
unless --allow-failures.
"""
import argparse
import logging
import os
import re
import sys
import tempfile
import time
import types
import unittest


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="strata", choices=["strata", "gloo"])
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--all", action="store_true", help="every test of the suite, not the default subset")
    ap.add_argument("-k", default="", help="only tests whose name matches this regex (within the selection)")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per test before its ranks are killed")
    ap.add_argument("--allow-failures", action="store_true")
    return ap.parse_args()


# The suite reads its backend and world size from the environment when it is imported, in
# this process and in every rank it spawns (they re-import this file as __mp_main__).
if __name__ == "__main__":
    ARGS = parse_args()
    os.environ["BACKEND"] = ARGS.backend
    os.environ["WORLD_SIZE"] = str(ARGS.world_size)
    os.environ["TEMP_DIR"] = tempfile.mkdtemp(prefix="strata-dist-")
    sys.argv = sys.argv[:1]  # torch's test utilities parse the command line when imported
BACKEND = os.environ["BACKEND"]

try:
    import expecttest  # noqa: F401
except ImportError:
    # torch's test utilities derive their TestCase from expecttest's, which adds only
    # assertExpectedInline (unused by the distributed suite); Debian 12 does not package
    # it, so unittest's TestCase stands in.
    sys.modules["expecttest"] = types.ModuleType("expecttest")
    sys.modules["expecttest"].TestCase = unittest.TestCase
    sys.modules["expecttest"].ACCEPT = False

import torch  # noqa: E402
import torch.testing._internal.common_distributed as common  # noqa: E402

if BACKEND == "strata":
    import strata.torch  # noqa: F401,E402  registers the backend

    common.DistTestCases.backend_feature["plugin"].add("strata")
    common.DistTestCases.backend_feature["ddp"].add("strata")
    common.DistTestCases.skip_collective["sendrecv anysource"].add("strata")

from torch.testing._internal.distributed.distributed_test import DistributedTest, TestDistBackend  # noqa: E402

logging.disable(logging.INFO)  # torch's per-test INFO lines (processes started, store barriers)


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()


# The default subset. all_to_all and batch_isend_irecv are left out: on CPU the suite runs
# them for MPI and gloo only (tests/torch/calls.py checks them).
CALLS = ["all_reduce", "broadcast", "reduce", "all_gather", "gather", "scatter", "reduce_scatter", "send_recv",
         "isend", "irecv", "barrier"]
EXCLUDE = re.compile(r"cuda|gpu|nccl|gloo|mpi|complex|profil|object|coalesced|group")


def default_subset(names):
    picked = sorted(n for n in names if any(n.startswith("test_" + c) for c in CALLS) and not EXCLUDE.search(n))
    return picked[::2]


class Counts(unittest.TextTestResult):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.passed = []
        self.started = {}

    def startTest(self, test):
        self.started[test] = time.time()
        super().startTest(test)

    def _line(self, test, verdict, why=""):
        name = test.id().split(".")[-1]
        dt = time.time() - self.started.get(test, time.time())
        first = why.strip().splitlines()[-1] if why.strip() else ""
        print(f"{verdict:5} {name} ({dt:.1f} s){': ' + first[:300] if first else ''}", flush=True)

    def addSuccess(self, test):
        super().addSuccess(test)
        self.passed.append(test)
        self._line(test, "PASS")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._line(test, "SKIP", reason)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._line(test, "FAIL", self.failures[-1][1])

    def addError(self, test, err):
        super().addError(test, err)
        self._line(test, "ERROR", self.errors[-1][1])


def main(args):
    common.TIMEOUT_DEFAULT = args.timeout

    names = unittest.TestLoader().getTestCaseNames(TestDistBackendWithSpawn)
    chosen = sorted(names) if args.all else default_subset(names)
    if args.k:
        chosen = [n for n in chosen if re.search(args.k, n)]
    if args.list:
        print("\n".join(chosen))
        print(f"{len(chosen)} of {len(names)} tests")
        return 0
    print(f"distributed_suite: {args.backend}, {os.environ['WORLD_SIZE']} ranks, {len(chosen)} of {len(names)} tests "
          f"of torch {torch.__version__}'s distributed_test.py", flush=True)
    suite = unittest.TestSuite(TestDistBackendWithSpawn(n) for n in chosen)
    t0 = time.time()
    result = unittest.TextTestRunner(resultclass=Counts, verbosity=0, stream=open(os.devnull, "w")).run(suite)
    failed = len(result.failures) + len(result.errors)
    print(f"distributed_suite: {args.backend} pass {len(result.passed)} skip {len(result.skipped)} fail {failed} "
          f"({time.time() - t0:.0f} s)")
    return 1 if failed and not args.allow_failures else 0


if __name__ == "__main__":
    sys.exit(main(ARGS))
