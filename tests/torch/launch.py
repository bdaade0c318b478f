"""Starting a job of N python ranks under torchrun or strata-run, for the torch tests.

Debian 12's torchrun (torch 1.13 on Python 3.11) dies at start with its default
`--redirects 0 --tee 0` (Python 3.11 iterates flag enums differently); `--redirects 1
--tee 1 --log_dir DIR` gets past it. --standalone picks a free port for the rendezvous.
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = sys.executable


def strata_run():
    """build/bin/strata-run, or STRATA_RUN."""
    path = os.environ.get("STRATA_RUN") or os.path.join(HERE, "..", "..", "build", "bin", "strata-run")
    if not os.access(path, os.X_OK):
        sys.exit(f"no strata-run at {path} (build it, or set STRATA_RUN)")
    return path


def command(launcher, n, script_args, log_dir=None, grace=None):
    """The command line that starts `script_args` (a python script and its arguments) on n ranks."""
    if launcher == "torchrun":
        log_dir = log_dir or tempfile.mkdtemp(prefix="strata-torchrun-")
        return [PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(n),
                "--redirects", "1", "--tee", "1", "--log_dir", log_dir] + script_args
    if launcher == "strata-run":
        return [strata_run(), "-n", str(n)] + (["--grace", str(grace)] if grace else []) + ["--", PYTHON] + script_args
    raise ValueError(f"unknown launcher {launcher}")


def run(launcher, n, script_args, timeout, **kw):
    """Runs the job to its end: (exit status, output). A job past `timeout` is killed."""
    p = subprocess.run(command(launcher, n, script_args, **kw), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=timeout, start_new_session=True)
    return p.returncode, p.stdout
