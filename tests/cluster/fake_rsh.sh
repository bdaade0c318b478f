#!/bin/sh
# mpirun's remote shell for the two-host test (--mca plm_rsh_agent): "ssh HOST COMMAND"
# runs COMMAND here instead, with STRATA_HOST=mpi-HOST so that Strata treats each named
# host as a machine of its own (shared memory inside, tcp between), as ssh to two real
# hosts would give.
host=$1
shift
exec env STRATA_HOST="mpi-$host" sh -c "$*"
