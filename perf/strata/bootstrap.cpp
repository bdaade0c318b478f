#include "bootstrap.hpp"

#include <cstdlib>
#include <mutex>

namespace perf {

namespace {

bool under_launcher() { return !strata::launch_info().launcher.empty(); }

// The processes' own job: rank and size, and the unique id of the threads' communicator.
struct ProcessJob {
  int rank = 0, size = 1;
  strata::UniqueId id{};
};

const ProcessJob& process_job() {
  static ProcessJob job;
  static std::once_flag once;
  std::call_once(once, [] {
    if (!under_launcher()) {
      job.id = strata::get_unique_id();
      return;
    }
    strata::Comm processes = strata::Comm::init_from_env();
    job.rank = processes.rank();
    job.size = processes.size();
    if (job.rank == 0) job.id = strata::get_unique_id();
    processes.broadcast(&job.id, &job.id, sizeof job.id, strata::DataType::uint8, 0);
    processes.destroy();
  });
  return job;
}

}  // namespace

strata::Comm join_job(int thread, int threads) {
  if (!under_launcher()) setenv("STRATA_SOCKET_IFNAME", "lo", /*overwrite=*/0);
  if (threads == 1) {
    if (under_launcher()) return strata::Comm::init_from_env();
    return strata::Comm::init_rank(1, strata::get_unique_id(), 0);
  }
  const ProcessJob& job = process_job();
  return strata::Comm::init_rank(job.size * threads, job.id, job.rank * threads + thread);
}

}  // namespace perf
