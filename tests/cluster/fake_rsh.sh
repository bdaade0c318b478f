#!/bin/sh
# mpirun's remote shell for the two-host test (--mca plm_rsh_agent): "ssh HOST COMMAND"
# runs COMMAND here instead, as ssh to a machine of its own would:
#  - STRATA_HOST=mpi-HOST, so Strata treats each named host as a machine (shared memory
#    inside, tcp between);
#  - a temporary directory of its own (under FAKE_RSH_TMP), because OpenMPI's daemons
#    name their session directory after the hostname, and two of them on one machine
#    race to create it.
host=$1
shift
tmp="${FAKE_RSH_TMP:-/tmp}/host-$host"
mkdir -p "$tmp"
exec env STRATA_HOST="mpi-$host" TMPDIR="$tmp" sh -c "$*"
