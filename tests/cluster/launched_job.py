#!/usr/bin/env python3
"""Strata programs started by a cluster's own launcher, for real: mpirun, torchrun, srun.

    launched_job.py mpirun|torchrun|slurm --bin BUILD/bin --data tinyshakespeare.txt

Under the launcher named, with no Strata launcher anywhere, it runs:
  - strata-launched-rank: each rank prints what launch_info() read and what the
    communicator is; both are checked against the placement the launcher was asked for,
    and an all_reduce / all_gather against their closed forms;
  - strata-perf, every collective it has, checked (-c 1: #wrong 0 on every row);
  - strata-train for a few steps with --dp N: the losses against the same run serial
    (relative 1e-4: only the summation order differs) and one parameter checksum on
    every rank;
  - a rank that SIGKILLs itself mid all_reduce: the job ends (no hang) and every
    survivor that reports an error names the killed rank.
The slurm mode first starts a one-machine Slurm cluster (munged, slurmctld, two slurmd
playing nodes n1 and n2) in a temporary directory and a private mount namespace, and
stops it at the end. Exit status 77 (ctest's skip) when the launcher or the daemons are
not installed, with the reason on the last line; installed daemons that do not start are
a failure, with the ends of their logs.
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SKIP = 77
COLLECTIVES = ["all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "all_to_all",
               "sendrecv", "pipeline"]
DEBIAN_PYTHON = "/usr/bin/python3"  # Debian's python3-torch lives here, whatever is first on PATH
KILLED_RANK = 1
# What STRATA_DEBUG=INFO logs when ranks 0,1 and 2,3 are on two hosts.
BETWEEN_TWO_HOSTS = [r"\[0\] STRATA INFO rank 0 -> rank 1 via shm", r"\[0\] STRATA INFO rank 0 -> rank 2 via tcp"]
FAKE_RSH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_rsh.sh")


class Skip(Exception):
    pass


class Failed(Exception):
    pass


def check(cond, what, output=""):
    if not cond:
        raise Failed(what + ("\n--- output ---\n" + output[-6000:] if output else ""))


def run(argv, env=None, timeout=120, more=()):
    """Runs a command (and `more` commands beside it, e.g. one launcher per node) each in
    its own process group; on timeout the groups are killed and the run counts as a hang.
    Returns (the first non-zero status or 0, the outputs, seconds)."""
    start = time.monotonic()
    procs = [subprocess.Popen(a, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              env=env, start_new_session=True, text=True, errors="replace")
             for a in [argv] + list(more)]
    outs, hung = [], False
    for p in procs:
        try:
            outs.append(p.communicate(timeout=max(1, timeout - (time.monotonic() - start)))[0])
        except subprocess.TimeoutExpired:
            hung = True
            for q in procs:
                if q.poll() is None:
                    os.killpg(q.pid, signal.SIGKILL)
            outs.append(p.communicate()[0])
    out = "\n".join(outs)
    if hung:
        raise Failed("hung: no end within %d s: %s\n%s" % (timeout, " ".join(argv), out[-6000:]))
    status = next((p.returncode for p in procs if p.returncode != 0), 0)
    return status, out, time.monotonic() - start


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_free(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def master_port():
    """A MASTER_PORT for torchrun: it and MASTER_PORT+1 (Strata's root) free on 127.0.0.1,
    below the kernel's ephemeral range, as launcher/root_port.hpp picks a root port. From
    inside the range, an outgoing connection can take MASTER_PORT+1 before rank 0 binds it
    (the agents' connections to the store on MASTER_PORT once did)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        lo = 32768
    rng = random.SystemRandom()
    for _ in range(1000 if lo - 2 > 10000 else 0):
        port = rng.randint(10000, lo - 2)
        if port_free(port) and port_free(port + 1):
            return port
    return free_port()  # no room below the range: the kernel's choice


# ---- launchers: each gives `prefixes(n, env, extra)`, the argv of each launcher process
# (one, or one per emulated node) that together start n ranks of what follows,
# `placement(n)`, rank -> (local rank, local size) as it was asked for, and `label`, the
# command as a person would type it, for the report.

class Mpirun:
    name = "mpirun"

    def __init__(self, args):
        if not shutil.which("mpirun"):
            raise Skip("mpirun is not installed (Debian: openmpi-bin)")
        self.tmp = tempfile.mkdtemp(prefix="strata-mpirun-")  # the named hosts' TMPDIRs
        self.env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                        FAKE_RSH_TMP=self.tmp)

    hosts = 1  # with 2: -H a:N/2,b:N/2, "ssh" to each host through fake_rsh.sh

    def prefixes(self, n, env, extra=()):
        # -x passes each variable to the ranks, as one does on a real cluster.
        xs = [a for k in sorted(env) for a in ("-x", "%s=%s" % (k, env[k]))]
        where = []
        if self.hosts > 1:
            where = ["-H", ",".join("%s:%d" % (h, n // self.hosts) for h in "ab"[:self.hosts]),
                     "--mca", "plm_rsh_agent", FAKE_RSH, "--mca", "plm_rsh_no_tree_spawn", "1"]
        return [["mpirun", "-np", str(n), "--oversubscribe", "--bind-to", "none"] + where + xs + list(extra)]

    def label(self, n, extra=()):
        hosts = " -H " + ",".join("%s:%d" % (h, n // self.hosts) for h in "ab"[:self.hosts]) if self.hosts > 1 else ""
        return " ".join(["mpirun -np %d%s" % (n, hosts)] + list(extra))

    def placement(self, n):
        per_host = n // self.hosts
        return {r: (r % per_host, per_host) for r in range(n)}

    def stop(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


class Torchrun:
    name = "torchrun"

    def __init__(self, args):
        probe = subprocess.run([DEBIAN_PYTHON, "-c", "import torch.distributed.run"], capture_output=True)
        if probe.returncode != 0:
            raise Skip("torch is not importable by %s (Debian: python3-torch)" % DEBIAN_PYTHON)
        self.logs = tempfile.mkdtemp(prefix="strata-torchrun-")
        self.env = dict(os.environ)

    nodes = 1  # torchrun agents, one per emulated node, all on this machine

    def prefixes(self, n, env, extra=()):
        # torch 1.13 on Python 3.11 dies at start unless output is redirected (--redirects
        # 1 --tee 1 with a log directory); --no_python runs the program itself. The agent
        # looks at its workers every --monitor_interval seconds (5 by default).
        port = str(master_port())
        per_node = n // self.nodes
        return [[DEBIAN_PYTHON, "-m", "torch.distributed.run", "--nnodes", str(self.nodes), "--node_rank", str(i),
                 "--nproc_per_node", str(per_node), "--master_addr", "127.0.0.1", "--master_port", port,
                 "--monitor_interval", "0.2", "--redirects", "1", "--tee", "1",
                 "--log_dir", tempfile.mkdtemp(dir=self.logs)] + list(extra) + ["--no_python"]
                for i in range(self.nodes)]

    def label(self, n, extra=()):
        return " ".join(["torchrun --nnodes %d --nproc_per_node %d" % (self.nodes, n // self.nodes)] + list(extra))

    def placement(self, n):
        per_node = n // self.nodes
        return {r: (r % per_node, per_node) for r in range(n)}

    def stop(self):
        shutil.rmtree(self.logs, ignore_errors=True)


class Slurm:
    """A Slurm cluster of two nodes, n1 and n2, on this machine. Both slurmd run here; a
    task prolog gives each node's tasks STRATA_HOST=<node>, so Strata treats them as two
    hosts (shared memory inside a node, tcp between) as on a real cluster. The node names
    resolve through a private /etc/hosts, in a mount namespace only this test sees."""
    name = "slurm"
    nodes = ["n1", "n2"]
    cpus_per_node = 2

    def __init__(self, args):
        if os.geteuid() != 0:
            raise Skip("the one-machine Slurm cluster needs root (its daemons run as root)")
        for tool in ("munged", "slurmctld", "slurmd", "srun", "sinfo"):
            if not shutil.which(tool):
                raise Skip("%s is not installed (Debian: munge slurmctld slurmd slurm-client)" % tool)
        if os.environ.get("LAUNCHED_JOB_IN_NAMESPACE") != "1":
            raise RuntimeError("the slurm mode must run inside its mount namespace (main() arranges it)")
        self.dir = tempfile.mkdtemp(prefix="strata-slurm-")
        os.chmod(self.dir, 0o755)  # munged checks that its socket's directory is reachable
        self.daemons = []
        try:
            self._start()
        except Exception:
            self.stop()
            raise

    def _path(self, name):
        return os.path.join(self.dir, name)

    def _daemon(self, argv):
        log = open(self._path(os.path.basename(argv[0]) + "-%d.out" % len(self.daemons)), "w")
        self.daemons.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                             start_new_session=True))

    def _start(self):
        d = self.dir
        # Node names resolve to this machine, for Slurm and for Strata's root address.
        with open("/etc/hosts") as f:
            hosts = f.read()
        with open(self._path("hosts"), "w") as f:
            f.write(hosts + "\n127.0.0.1 " + " ".join(self.nodes) + "\n")
        if subprocess.run(["mount", "--bind", self._path("hosts"), "/etc/hosts"]).returncode != 0:
            raise Skip("cannot bind-mount a private /etc/hosts for the node names")
        with open(self._path("munge.key"), "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(self._path("munge.key"), 0o400)
        sock = self._path("munge.sock")
        self._daemon(["munged", "--foreground", "--force", "--socket=" + sock, "--key-file=" + self._path("munge.key"),
                      "--pid-file=" + self._path("munged.pid"), "--log-file=" + self._path("munged.log"),
                      "--seed-file=" + self._path("munged.seed")])
        prolog = self._path("task_prolog.sh")
        with open(prolog, "w") as f:
            f.write("#!/bin/sh\necho export STRATA_HOST=slurm-$SLURMD_NODENAME\n")
        os.chmod(prolog, 0o755)
        ports = [free_port() for _ in range(2 + len(self.nodes))]
        os.makedirs(self._path("state"))
        for node in self.nodes:
            os.makedirs(self._path("spool-" + node))
            os.makedirs(self._path("tmp-" + node))
        conf = ["ClusterName=strata-test", "SlurmctldHost=localhost(127.0.0.1)",
                "SlurmctldPort=%d" % ports[0], "SlurmdPort=%d" % ports[1],
                "AuthType=auth/munge", "AuthInfo=socket=" + sock, "CredType=cred/munge",
                "SlurmUser=root", "SlurmdUser=root", "StateSaveLocation=" + self._path("state"),
                "SlurmdSpoolDir=" + self._path("spool-%n"), "SlurmctldPidFile=" + self._path("slurmctld.pid"),
                "SlurmdPidFile=" + self._path("slurmd-%n.pid"), "SlurmctldLogFile=" + self._path("slurmctld.log"),
                "SlurmdLogFile=" + self._path("slurmd-%n.log"),
                # Per node: srun --mpi=pmix keeps its server's files there (it would
                # collide in /tmp with two nodes on one machine).
                "TmpFS=" + self._path("tmp-%n"),
                # No cgroups: processes are tracked by their parent links.
                "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "TaskProlog=" + prolog,
                "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
                "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU",
                # Each node declares 2 CPUs whatever this machine has.
                "SlurmdParameters=config_overrides", "MpiDefault=none", "ReturnToService=2", "KillWait=5"]
        for node, port in zip(self.nodes, ports[2:]):
            conf.append("NodeName=%s NodeHostname=%s NodeAddr=127.0.0.1 Port=%d CPUs=%d RealMemory=1000"
                        % (node, socket.gethostname(), port, self.cpus_per_node))
        conf.append("PartitionName=test Nodes=%s Default=YES MaxTime=INFINITE State=UP" % ",".join(self.nodes))
        with open(self._path("slurm.conf"), "w") as f:
            f.write("\n".join(conf) + "\n")
        self.env = dict(os.environ, SLURM_CONF=self._path("slurm.conf"))
        os.environ["SLURM_CONF"] = self._path("slurm.conf")
        time.sleep(0.3)  # munged's socket
        self._daemon(["slurmctld", "-D", "-f", self._path("slurm.conf")])
        for node in self.nodes:
            self._daemon(["slurmd", "-D", "-f", self._path("slurm.conf"), "-N", node])
        deadline = time.monotonic() + 30
        states = ""
        while time.monotonic() < deadline:
            for p in self.daemons:
                if p.poll() is not None:
                    raise Failed("%s exited at start with status %d\n%s" % (p.args[0], p.returncode, self._logs()))
            q = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True, text=True, env=self.env)
            states = q.stdout.strip()
            if q.returncode == 0 and states.count("idle") == len(self.nodes):
                return
            time.sleep(0.3)
        raise Failed("the Slurm nodes did not become idle within 30 s (sinfo: %r)\n%s" % (states, self._logs()))

    def _logs(self):
        """The end of each daemon's log: with the daemons installed, a start that fails is
        this test's failure (a broken setup must not pass as skipped), and this says why."""
        text = ""
        for name in sorted(os.listdir(self.dir)):
            if name.endswith((".log", ".out")):
                with open(self._path(name), errors="replace") as f:
                    text += "--- %s ---\n%s\n" % (name, f.read()[-1500:])
        return text

    def prefixes(self, n, env, extra=()):
        return [["srun", "-N", str(len(self.nodes)), "-n", str(n), "--label"] + list(extra)]

    def label(self, n, extra=()):
        return " ".join(["srun -N %d -n %d" % (len(self.nodes), n)] + list(extra))

    def placement(self, n):
        # Block distribution over the nodes, as srun -N 2 -n N does with N = 2 CPUs per node.
        per = -(-n // len(self.nodes))
        return {r: (r % per, min(per, n - r // per * per)) for r in range(n)}

    def stop(self):
        # Jobs first, so no step outlives its slurmd; then the Slurm daemons, then munged.
        if self.daemons:
            subprocess.run(["scancel", "--full", "--user", "root"], env=self.env, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                q = subprocess.run(["squeue", "-h"], capture_output=True, text=True, env=self.env)
                if q.returncode != 0 or not q.stdout.strip():
                    break
                time.sleep(0.3)
        for group in (self.daemons[1:], self.daemons[:1]):
            for p in group:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGTERM)
            for p in group:
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
        subprocess.run(["umount", "/etc/hosts"], stderr=subprocess.DEVNULL)
        if os.environ.get("LAUNCHED_JOB_KEEP") != "1":  # keep the daemons' logs for a look
            shutil.rmtree(self.dir, ignore_errors=True)


# ---- what runs under each launcher

def job_env(extra=None):
    env = {"STRATA_TIMEOUT": "30"}
    env.update(extra or {})
    return env


def launch(launcher, n, argv, extra_env=None, timeout=120, prefix_extra=()):
    env = job_env(extra_env)
    pre = launcher.prefixes(n, env, prefix_extra)
    full_env = dict(launcher.env)
    full_env.update(env)
    # The ranks must find everything from the launcher: nothing of strata-run's may leak in.
    for k in ("STRATA_RANK", "STRATA_WORLD_SIZE", "STRATA_ROOT", "STRATA_SECRET"):
        full_env.pop(k, None)
    return run(pre[0] + argv, env=full_env, timeout=timeout, more=[p + argv for p in pre[1:]])


def check_ranks(launcher, args, n, extra_env=None, prefix_extra=(), root_via=None, logged=()):
    """strata-launched-rank: launch_info() and the communicator against the placement."""
    status, out, secs = launch(launcher, n, [os.path.join(args.bin, "strata-launched-rank")],
                               dict(extra_env or {}, STRATA_DEBUG="INFO"), prefix_extra=prefix_extra)
    check(status == 0, "%s: strata-launched-rank on %d ranks exited with %d" % (launcher.name, n, status), out)
    want = launcher.placement(n)
    seen = {}
    for m in re.finditer(r"LAUNCH launcher=(\S+) rank=(\d+) size=(\d+) local=(-?\d+)/(\d+)", out):
        name, rank, size, lr, ls = m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)), int(m.group(5))
        check(name == launcher.name, "rank %d saw launcher %r, not %r" % (rank, name, launcher.name), out)
        check(size == n, "rank %d saw size %d, not %d" % (rank, size, n), out)
        check((lr, ls) == want.get(rank), "rank %d saw local %d/%d, the launcher placed it at %s" %
              (rank, lr, ls, want.get(rank)), out)
        seen[rank] = True
    check(sorted(seen) == list(range(n)), "ranks reported: %s, expected 0..%d" % (sorted(seen), n - 1), out)
    for r in range(n):
        check("COMM rank=%d size=%d" % (r, n) in out, "rank %d's communicator is not rank %d of %d" % (r, r, n), out)
        check("CHECKED rank=%d" % r in out, "rank %d's all_reduce/all_gather did not match" % r, out)
    if root_via:
        check(re.search(r"root via " + root_via, out), "the root was not found via %r" % root_via, out)
    for pattern in logged:
        check(re.search(pattern, out), "STRATA_DEBUG=INFO did not log %r" % pattern, out)
    print("  %s: launch_info and communicator match the placement; all_reduce/all_gather checked "
          "(%.1f s)" % (launcher.label(n, prefix_extra), secs))
    return out


def check_perf(launcher, args, n, collectives):
    """strata-perf, each collective checked; read from its --json file, since launchers may
    split the table's lines (torchrun's tee does)."""
    for coll in collectives:
        with tempfile.TemporaryDirectory() as tmp:
            json_path = os.path.join(tmp, "perf.json")
            status, out, secs = launch(launcher, n, [os.path.join(args.bin, "strata-perf"), coll, "-b", "8", "-e",
                                                     "1M", "-f", "32", "-n", "5", "-w", "1", "-c", "1",
                                                     "-J", json_path])
            check(status == 0, "%s: strata-perf %s on %d ranks exited with %d" % (launcher.name, coll, n, status), out)
            check(os.path.exists(json_path), "strata-perf %s wrote no results" % coll, out)
            with open(json_path) as f:
                doc = json.load(f)
        rows = doc["results"]
        check(doc["ranks"] == n, "strata-perf %s ran on %s ranks, not %d" % (coll, doc["ranks"], n), out)
        check(len(rows) == 4, "strata-perf %s: %d sizes, expected 4 (8 B to 1 MiB by 32)" % (coll, len(rows)), out)
        bad = [(r["size"], r["oop_wrong"], r["ip_wrong"]) for r in rows 
               if r["oop_wrong"] != 0 or r["ip_wrong"] not in (0, None)]  # None: no in-place form
        check(not bad, "strata-perf %s: wrong results (size, out-of-place, in-place): %s" % (coll, bad), out)
    print("  %s: strata-perf %s, 8 B to 1 MiB, out of and in place, every row checked, #wrong 0" %
          (launcher.label(n), " ".join(collectives)))


TRAIN = ["--layers", "2", "--heads", "3", "--dim", "27", "--ctx", "32", "--batch", "8", "--steps", "6",
         "--warmup", "2", "--lr", "3e-3", "--eval-every", "0", "--sample-len", "0", "--threads", "1"]


def train_losses(out):
    return {int(m.group(1)): float(m.group(2)) for m in re.finditer(r"step\s+(\d+)/\d+ \| loss ([\d.]+)", out)}


def check_train(launcher, args, n, serial):
    argv = [os.path.join(args.bin, "strata-train"), "--data", args.data] + TRAIN + ["--dp", str(n), "--zero", "1"]
    status, out, secs = launch(launcher, n, argv)
    check(status == 0, "%s: strata-train --dp %d exited with %d" % (launcher.name, n, status), out)
    losses = train_losses(out)
    check(sorted(losses) == sorted(serial), "steps %s, serial had %s" % (sorted(losses), sorted(serial)), out)
    worst = max(abs(losses[s] - serial[s]) / abs(serial[s]) for s in serial)
    check(worst <= 1e-4, "losses differ from the serial run by %.2g (relative) > 1e-4" % worst, out)
    sums = re.findall(r"rank (\d+) parameter checksum (\S+)", out)
    check(len(sums) == n and len({s for _, s in sums}) == 1, "parameter checksums per rank: %s" % sums, out)
    print("  %s: strata-train --dp %d --zero 1, %d steps, worst relative loss difference to serial %.1g, one "
          "parameter checksum (%.1f s)" % (launcher.label(n), n, len(losses), worst, secs))


def check_killed_rank(launcher, args, n, prefix_extra=()):
    status, out, secs = launch(launcher, n, [os.path.join(args.bin, "strata-launched-rank"), "--kill-rank",
                                             str(KILLED_RANK)], timeout=60, prefix_extra=prefix_extra)
    check(status != 0, "%s: a job with a killed rank exited with 0" % launcher.name, out)
    errors = re.findall(r"PEER-ERROR rank=(\d+) peer=(-?\d+)", out)
    check(errors, "%s: no survivor reported the killed rank before the launcher ended the job" % launcher.name, out)
    wrong = [(r, p) for r, p in errors if int(p) != KILLED_RANK]
    check(not wrong, "survivors blamed another rank than %d: %s" % (KILLED_RANK, wrong), out)
    check(not re.search(r"WRONG|ERROR (?!rank)", out.replace("PEER-ERROR", "")),
          "a survivor failed otherwise", out)
    print("  %s, rank %d killed: job ended in %.1f s with status %d; %d of %d survivors reported it, "
          "naming rank %d" % (launcher.label(n, prefix_extra), KILLED_RANK, secs, status, len(errors), n - 1, KILLED_RANK))


def check_not_linked_to_mpi(args):
    for tool in ("strata-perf", "strata-train", "strata-launched-rank"):
        path = os.path.join(args.bin, tool)
        out = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
        check("libmpi" not in out, "%s is linked to MPI" % tool, out)
    print("  mpirun    strata-perf, strata-train and strata-launched-rank link no MPI library")


def serial_losses(args):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STRATA_RANK", "OMPI_", "PMIX_", "SLURM_"))}
    status, out, _ = run([os.path.join(args.bin, "strata-train"), "--data", args.data] + TRAIN, env=env)
    check(status == 0, "the serial strata-train exited with %d" % status, out)
    return train_losses(out)


def scenario(launcher, args):
    serial = serial_losses(args)
    if launcher.name == "mpirun":
        check_not_linked_to_mpi(args)
        check_ranks(launcher, args, 4, root_via="PMIx")
        check_perf(launcher, args, 4, COLLECTIVES)
        check_train(launcher, args, 4, serial)
        check_killed_rank(launcher, args, 4)
        # Two hosts, as `mpirun -H a:2,b:2` over ssh: shared memory inside, tcp between.
        launcher.hosts = 2
        check_ranks(launcher, args, 4, root_via="PMIx", logged=BETWEEN_TWO_HOSTS)
        check_perf(launcher, args, 4, COLLECTIVES)
        check_train(launcher, args, 4, serial)
    elif launcher.name == "torchrun":
        check_ranks(launcher, args, 4, root_via=r"127\.0\.0\.1:\d+ \(MASTER_ADDR and MASTER_PORT\+1\)")
        # Each torchrun start costs seconds of Python; the collectives' checks run under
        # the other launchers and strata-run, so here: one reduction and one data movement.
        check_perf(launcher, args, 4, ["all_reduce", "all_to_all"])
        check_train(launcher, args, 4, serial)
        check_killed_rank(launcher, args, 3)
        # Two agents, as on two nodes (torchrun --nnodes 2 --node_rank i, static rendezvous).
        launcher.nodes = 2
        check_ranks(launcher, args, 4, root_via=r"127\.0\.0\.1:\d+ \(MASTER_ADDR and MASTER_PORT\+1\)")
        check_train(launcher, args, 4, serial)
    else:
        # srun with no PMI: rank 0 listens at the step's first node, port from the job id.
        # The nodes are two hosts to Strata: shared memory inside, tcp between.
        check_ranks(launcher, args, 4, prefix_extra=["--mpi=none"], root_via=r"n1:\d+ \(the step's first node",
                    logged=BETWEEN_TWO_HOSTS)
        # srun --mpi=pmix: the id through Slurm's PMIx server.
        check_ranks(launcher, args, 4, prefix_extra=["--mpi=pmix"], root_via="PMIx")
        check_perf(launcher, args, 4, COLLECTIVES)
        check_train(launcher, args, 4, serial)
        check_killed_rank(launcher, args, 4, prefix_extra=["--kill-on-bad-exit=1"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("launcher", choices=["mpirun", "torchrun", "slurm"])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--data", required=True)
    args = ap.parse_args()
    if args.launcher == "slurm" and os.environ.get("LAUNCHED_JOB_IN_NAMESPACE") != "1":
        # Everything Slurm needs (the node names in /etc/hosts) stays in a mount namespace
        # that ends with this process.
        if os.geteuid() != 0:
            print("SKIPPED: the one-machine Slurm cluster needs root (its daemons run as root)")
            return SKIP
        if not shutil.which("unshare"):
            print("SKIPPED: unshare (util-linux) is missing")
            return SKIP
        env = dict(os.environ, LAUNCHED_JOB_IN_NAMESPACE="1")
        r = subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable] + sys.argv, env=env)
        return r.returncode
    launcher = None
    try:
        launcher = {"mpirun": Mpirun, "torchrun": Torchrun, "slurm": Slurm}[args.launcher](args)
        print("%s: starting Strata programs with no Strata launcher" % args.launcher)
        scenario(launcher, args)
    except Skip as e:
        print("SKIPPED: %s" % e)
        return SKIP
    except Failed as e:
        print("FAILED: %s" % e)
        return 1
    finally:
        if launcher:
            launcher.stop()
    print("PASSED: %s ran the checked collectives, the trainer and a killed rank" % args.launcher)
    return 0


if __name__ == "__main__":
    sys.exit(main())
