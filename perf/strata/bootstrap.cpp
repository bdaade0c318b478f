#include "bootstrap.hpp"

#include <cstdlib>
#include <cstring>
#include <stdexcept>

#ifdef STRATA_PERF_WITH_MPI
#include <mpi.h>
#endif

namespace perf {

namespace {

bool env_set(const char* name) { return std::getenv(name) != nullptr; }

void default_ifname_to_loopback() { setenv("STRATA_SOCKET_IFNAME", "lo", /*overwrite=*/0); }

#ifdef STRATA_PERF_WITH_MPI

class MpiSession : public LaunchSession {
 public:
  MpiSession() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      if (MPI_Init(nullptr, nullptr) != MPI_SUCCESS) throw std::runtime_error("MPI_Init failed");
      owns_ = true;
    }
  }
  ~MpiSession() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owns_ && !finalized) MPI_Finalize();
  }
  void abort_job() noexcept override { MPI_Abort(MPI_COMM_WORLD, 1); }

 private:
  bool owns_ = false;
};

// True when all ranks of MPI_COMM_WORLD share one node.
bool single_host(int world_size) {
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const char* world = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (local && world) return std::strcmp(local, world) == 0;
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int node_size = 0;
  MPI_Comm_size(node, &node_size);
  MPI_Comm_free(&node);
  return node_size == world_size;
}

Joined join_with_mpi() {
  Joined j;
  auto session = std::make_unique<MpiSession>();
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (single_host(size)) default_ifname_to_loopback();

  // Rank 0 sends a status byte with the id so that a failed get_unique_id() fails all ranks.
  unsigned char msg[1 + sizeof(strata::UniqueId)] = {};
  std::string error;
  if (rank == 0) {
    try {
      const strata::UniqueId id = strata::get_unique_id();
      std::memcpy(msg + 1, id.bytes.data(), id.bytes.size());
      msg[0] = 1;
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  MPI_Bcast(msg, sizeof msg, MPI_BYTE, 0, MPI_COMM_WORLD);
  if (msg[0] != 1) throw std::runtime_error("rank 0 could not create the unique id: " + error);
  strata::UniqueId id;
  std::memcpy(id.bytes.data(), msg + 1, id.bytes.size());
  j.comm = strata::Comm::init_rank(size, id, rank);
  j.session = std::move(session);
  return j;
}

#endif  // STRATA_PERF_WITH_MPI

}  // namespace

Launch detect_launch() {
  if (env_set("STRATA_RANK")) return Launch::strata_run;
  if (env_set("OMPI_COMM_WORLD_SIZE") || env_set("PMI_SIZE")) return Launch::mpi;
  return Launch::single;
}

const char* name(Launch l) {
  switch (l) {
    case Launch::strata_run: return "strata-run";
    case Launch::mpi: return "mpi";
    case Launch::single: return "single";
  }
  return "?";
}

Joined join_job() {
  Joined j;
  switch (detect_launch()) {
    case Launch::strata_run:
      j.comm = strata::Comm::init_from_env();
      j.session = std::make_unique<LaunchSession>();
      return j;
    case Launch::mpi:
#ifdef STRATA_PERF_WITH_MPI
      return join_with_mpi();
#else
      throw std::runtime_error(
          "started by mpirun, but this strata-perf was built without MPI; use strata-run -n N instead");
#endif
    case Launch::single: {
      default_ifname_to_loopback();
      const strata::UniqueId id = strata::get_unique_id();
      j.comm = strata::Comm::init_rank(1, id, 0);
      j.session = std::make_unique<LaunchSession>();
      return j;
    }
  }
  throw std::logic_error("unreachable");
}

}  // namespace perf
