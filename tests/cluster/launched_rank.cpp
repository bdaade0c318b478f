// strata-launched-rank [--kill-rank R]: one rank of a job that a cluster's launcher
// (mpirun, torchrun, srun) started; tests/cluster/launched_job.py checks what it prints.
//
//   LAUNCH launcher=L rank=R size=N local=LR/LS   what launch_info() read
//   COMM rank=R size=N                            the communicator init_from_env() made
//   CHECKED rank=R                                all_reduce and all_gather matched the formula
//   with --kill-rank K: every rank loops 1 MiB all_reduces; rank K SIGKILLs itself after
//   20 of them; the others print  PEER-ERROR rank=R peer=P msg=...  and exit 3.
#include <signal.h>
#include <unistd.h>

#include <strata/strata.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  int kill_rank = -1;
  if (argc == 3 && std::strcmp(argv[1], "--kill-rank") == 0) kill_rank = std::atoi(argv[2]);
  try {
    strata::LaunchInfo l = strata::launch_info();
    std::printf("LAUNCH launcher=%s rank=%d size=%d local=%d/%d\n", l.launcher.c_str(), l.rank, l.size, l.local_rank,
                l.local_size);
    strata::Comm comm = strata::Comm::init_from_env();
    const int r = comm.rank(), n = comm.size();
    std::printf("COMM rank=%d size=%d\n", r, n);
    std::fflush(stdout);
    if (kill_rank >= 0) {
      std::vector<float> buf(1 << 18, 1.0f);
      for (int i = 0;; ++i) {
        if (r == kill_rank && i == 20) kill(getpid(), SIGKILL);
        try {
          comm.all_reduce(buf.data(), buf.data(), buf.size(), strata::DataType::float32, strata::ReduceOp::max);
        } catch (const strata::PeerError& e) {
          std::printf("PEER-ERROR rank=%d peer=%d msg=%s\n", r, e.peer(), e.what());
          std::fflush(stdout);
          return 3;
        }
      }
    }
    // Sum of ranks, and every rank's id gathered: both have closed forms.
    int64_t mine = r, sum = -1;
    comm.all_reduce(&mine, &sum, 1, strata::DataType::int64, strata::ReduceOp::sum);
    std::vector<int64_t> all(static_cast<size_t>(n), -1);
    comm.all_gather(&mine, all.data(), 1, strata::DataType::int64);
    bool ok = sum == int64_t{n} * (n - 1) / 2;
    for (int i = 0; i < n; ++i) ok = ok && all[static_cast<size_t>(i)] == i;
    comm.destroy();
    if (!ok) {
      std::printf("WRONG rank=%d sum=%lld\n", r, static_cast<long long>(sum));
      return 5;
    }
    std::printf("CHECKED rank=%d\n", r);
    return 0;
  } catch (const std::exception& e) {
    std::printf("ERROR %s\n", e.what());
    return 10;
  }
}
