#!/usr/bin/env bash
# strata-sim's command line: a table and the link report for a good run, the compare
# view with the tuner's choice marked, and bad input refused (status 2) with a message
# naming what was wrong (the file and line for a cluster).
#   cli.sh STRATA_SIM SOURCE_DIR
set -uo pipefail
sim=$1 src=$2
clusters=$src/perf/sim/clusters
fails=0
expect() {  # STATUS REGEX ARGS...: the run's status and output
  local want=$1 regex=$2
  shift 2
  local out status
  out=$("$sim" "$@" 2>&1)
  status=$?
  if [ "$status" != "$want" ] || ! grep -Eq -- "$regex" <<<"$out"; then
    echo "FAIL: strata-sim $* -> status $status (want $want), output:"
    echo "$out" | tail -5
    echo "  (want /$regex/)"
    fails=$((fails + 1))
  fi
}
expect 0 '^ +1048576 +262144 +float +sum +-1 .* [a-z_]+$' all_reduce --cluster "$clusters/superpod-1k.cluster" -b 1M -e 1M
expect 0 '^#  su +256 +256 ' all_reduce --cluster "$clusters/superpod-1k.cluster" -b 1M -e 1M
# 256 ranks of the same cluster: every algorithm's plans stay small.
compare=(all_reduce --cluster "$clusters/superpod-1k.cluster" --ranks 256 -b 64M -e 64M --compare)
expect 0 '^  [a-z_]+ .* \*.  predicted by the tuner' "${compare[@]}"
expect 0 '^# the tuner' "${compare[@]}"
expect 0 '^ +1048576 +1024 +float +none +-1 .* +0 +[a-z_]+$' all_gather --cluster "$clusters/superpod-1k.cluster" --ranks 256 -b 1M -e 1M -c 1
# Creation cost, against formulas: a binomial tree over 256 ranks is 1 + 8 hops deep (the
# root to rank 0, then one per bit of rank 255); a ring's peers are the overlay's own two
# neighbours (256 pairs in the job); direct connects every pair (255 a rank, 256*255/2).
small=(--cluster "$clusters/superpod-1k.cluster" --ranks 256 -b 1M -e 1M)
expect 0 '^# creation at 256 ranks: .* after 9 hops .* connects 2 peers at most per rank \(2.0 mean\), 256 connections' \
  all_reduce "${small[@]}" --algo ring
expect 0 '^# creation at 256 ranks: .* connects 255 peers at most per rank \(255.0 mean\), 32640 connections' \
  reduce_scatter "${small[@]}" --algo direct
expect 2 'bad-line.cluster:3: latency .fast. is not a time like 2us or 0.5ms' all_reduce --cluster "$src/tests/sim/data/bad-line.cluster"
expect 2 'superpod-1k.cluster:[0-9]+: 1000 ranks do not divide into groups of 256 \(the levels below .spine.\)' \
  all_reduce --cluster "$clusters/superpod-1k.cluster" --ranks 1000
expect 2 'a size of 0 B gives a count of 0' all_reduce --cluster "$clusters/superpod-1k.cluster" -b 0 -e 0
expect 2 'a size of 512 B gives a count of 0 \(float, 1024 ranks\)' all_gather --cluster "$clusters/superpod-1k.cluster" -b 512 -e 512
expect 2 '--algo tree does not implement all_reduce' all_reduce --cluster "$clusters/superpod-1k.cluster" --algo tree
expect 2 'cannot read the cluster file' all_reduce --cluster /nonexistent.cluster
expect 2 '--cluster FILE is needed' all_reduce -b 1M
expect 2 'unknown option .--bogus.' all_reduce --cluster "$clusters/superpod-1k.cluster" --bogus
expect 2 'root 5000 is not a rank of this 1024-rank cluster' broadcast --cluster "$clusters/superpod-1k.cluster" -r 5000
if [ "$fails" != 0 ]; then
  echo "$fails case(s) failed"
  exit 1
fi
echo "strata-sim command line: every case as expected"
