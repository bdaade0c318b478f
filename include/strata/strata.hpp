// Strata's C++ API: a communicator and its collectives on host or device memory.
//
//   strata::Comm comm = strata::Comm::init_from_env();   // under strata-run, torchrun, mpirun or srun
//   comm.all_reduce(buf, buf, n, strata::DataType::float32, strata::ReduceOp::sum);
//   comm.destroy();
//
// Semantics follow NCCL: every rank of a communicator calls the same collectives in the
// same order with matching count/type/op/root; point-to-point calls match in the order
// they are posted. Operations on one communicator execute in the order they were issued;
// an `_async` call returns at once with a Request. Every call also takes device buffers
// (strata/device.hpp), in a form with a stream that is ordered on it as NCCL's calls are.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <exception>

#include "strata/collective.hpp"
#include "strata/device.hpp"
#include "strata/error.hpp"
#include "strata/types.hpp"

namespace strata {

// The root's address plus a random secret; rank 0 makes it, every rank receives a copy
// out of band (MPI_Bcast, a file, ...). Opaque, 128 bytes, trivially copyable.
struct UniqueId {
  std::array<uint8_t, 128> bytes{};
};

// Starts a bootstrap root in this process (a thread that lives until all ranks of the
// job have joined, or STRATA_TIMEOUT passes) and returns its id. The root listens on
// the interface named by STRATA_SOCKET_IFNAME, else the first non-loopback interface
// that is up, else loopback.
UniqueId get_unique_id();

// The launcher that started this process, as Comm::init_from_env() reads it from the
// launcher's variables (docs/launcher.md has the list and the order).
struct LaunchInfo {
  std::string launcher;  // "strata-run", "torchrun", "mpirun", "slurm", "pmix"; "" when none
  int rank = 0, size = 1;
  int local_rank = 0, local_size = 1;  // this rank on its host; -1 and 0 where the launcher does not say
  // "host:port" where the job's ranks find rank 0's root when the launcher gives its address
  // (STRATA_ROOT, torchrun, srun); "" when it goes through a file or PMIx. Where a job's
  // ranks open the door for a replacement started by join_from_env (Comm::grow).
  std::string rendezvous;
};
// InvalidArgument when a launcher's variables are partial or malformed.
LaunchInfo launch_info();

// dst[i] = src[i] * factor[0] for `count` elements of `type` in host memory, with the
// arithmetic of the prod reduction (integers wrap; fp16 and bf16 multiply in fp32 and round
// once to nearest even). dst may be src; otherwise they do not overlap. What NCCL's
// pre-multiplied sum (ncclRedOpCreatePreMulSum) does to each rank's input before summing.
// InvalidArgument for an unknown type, or a null pointer where count > 0.
void scale(void* dst, const void* src, size_t count, DataType type, const void* factor);

// A pre-multiplied sum's factor (Comm's device calls taking it): one element of the call's
// type, in host or device memory.
struct PreMulSum {
  const void* factor;
};

// split's color for a rank that takes part in no new communicator (C: STRATA_SPLIT_NOCOLOR).
inline constexpr int kSplitNoColor = -1;

// One level of the hierarchy a communicator sees (docs/architecture.md, Hierarchy):
// "node" first (ranks that share a host, or STRATA_HIERARCHY's emulated nodes), then
// STRATA_HIERARCHY's upper levels ("rack", "island", ...). group[r] is rank r's group at
// this level, numbered 0, 1, ... in order of each group's first rank; a group of an upper
// level is a union of groups of the level below.
struct HierarchyLevel {
  std::string name;
  std::vector<int> group;
};

// Settings of one communicator that take precedence over the STRATA_* environment
// (docs/environment.md), for front ends that receive them from their own caller (the
// torch.distributed backend passes init_process_group's timeout).
struct CommOptions {
  // Seconds without progress before a peer is declared stuck, and the bound on joining
  // the bootstrap and connecting; 0: STRATA_TIMEOUT. Negative or not finite: InvalidArgument.
  double timeout_s = 0;
};

class Request;
struct CommState;
class OpQueue;

// A handle: copies refer to the same communicator. A default-constructed Comm is null.
class Comm {
 public:
  Comm() = default;

  // Collective over the `nranks` callers that pass the same id.
  static Comm init_rank(int nranks, const UniqueId& id, int rank);
  static Comm init_rank(int nranks, const UniqueId& id, int rank, const CommOptions& options);
  // Under a launcher (strata-run, torchrun, mpirun, srun): rank and size from its
  // variables; rank 0's bootstrap root at STRATA_ROOT, or found through the launcher
  // (docs/launcher.md). InvalidArgument, naming the variables, when none is found.
  static Comm init_from_env();

  bool valid() const { return state_ != nullptr; }
  int rank() const;
  int size() const;
  // The levels of this communicator's ranks, innermost first (at least "node"). Local:
  // every rank learnt them when the communicator was made.
  std::vector<HierarchyLevel> hierarchy() const;

  // Collective over this communicator. Ranks with the same color (>= 0) form a new
  // communicator, ordered by (key, old rank), with this one's settings (timeout included);
  // kSplitNoColor returns a null Comm. Any other negative color is an InvalidArgument on
  // every rank (the communicator stays usable).
  Comm split(int color, int key);

  // After a failure (or at any time), collective over the surviving ranks: they agree on
  // who is alive within STRATA_TIMEOUT (a rank that does not call shrink by then, or is
  // stopped, is left out) and get a new communicator of those ranks, numbered in their
  // old order, with the hierarchy and the tuner's choices made for the new shape. First
  // fails this communicator's running and queued operations on this rank (a call still
  // running on another rank fails as this rank's shrink reaches it); afterwards every
  // call on this communicator throws: destroy it. Throws PeerError when this rank was
  // left out. docs/api.md, "Shrink".
  Comm shrink();

  // ---- growing: ranks that are not in this communicator join it (docs/api.md, "Grow") ----
  // Collective: rank 0 opens a door for newcomers at `address` ("host:port"; "": the
  // interface get_unique_id would listen on, any port), unless one is open, and every rank
  // gets the id a newcomer passes to join(): the door's address and this communicator's
  // secret, which a newcomer must present (as a rank joining the bootstrap root must). The
  // door stays open until the communicator is destroyed. SystemError (on every rank) when
  // rank 0 cannot listen there.
  UniqueId open_door(const std::string& address = "");
  // Collective: how many newcomers wait at the door, having presented the secret and a
  // valid description (rank 0 counts; every rank gets its count). InvalidUsage without a door.
  int newcomers();
  // Collective over this communicator, with `count` newcomers (the first that came to the
  // door): a new communicator of this one's ranks and theirs, ordered by `key` (a newcomer
  // passes its own to join()); equal keys put this communicator's ranks first, in their
  // order, then newcomers in the order they came. This communicator stays as it was; a call
  // on it from another thread while grow runs is refused (InvalidUsage). TimeoutError on
  // every rank when fewer than `count` came within STRATA_TIMEOUT; a newcomer that leaves
  // before the new communicator is connected fails the grow on every rank (an error from
  // connecting it, within STRATA_TIMEOUT). Either way this communicator stays usable.
  Comm grow(int count, int key);
  // A rank that is not in the communicator: goes to the door of `id` (trying again until it
  // opens) and waits until the communicator's ranks grow() it in, for up to STRATA_TIMEOUT
  // (or options.timeout_s) in all. SystemError when the door closes the connection (a wrong
  // secret, or the communicator went away), TimeoutError when no grow took it in.
  static Comm join(const UniqueId& id, int key, const CommOptions& options = {});
  // join() at the job's rendezvous address (LaunchInfo::rendezvous) with the job's secret,
  // as init_from_env() finds them: a replacement for lost ranks, started with the job's
  // launcher variables. InvalidArgument where the rendezvous is a file or PMIx.
  static Comm join_from_env(int key);

  // Finishes queued operations, tells peers this rank is leaving, releases everything.
  // Any later call on this communicator throws InvalidUsage.
  void destroy();
  // Local and non-collective: fails queued and running operations (their waiters get an
  // error), closes connections so peers see this rank leave. Later calls throw.
  void abort();

  // ---- collectives; each blocking call equals `..._async(...).wait()` ----
  // In-place when send == recv (all_gather: send == recv + rank*sendcount;
  // reduce_scatter: recv == send + rank*recvcount).
  Request all_reduce_async(const void* send, void* recv, size_t count, DataType type, ReduceOp op);
  Request reduce_scatter_async(const void* send, void* recv, size_t recvcount, DataType type,
                               ReduceOp op);
  Request all_gather_async(const void* send, void* recv, size_t sendcount, DataType type);
  // `send` is read on the root only; `recv` is written on every rank.
  Request broadcast_async(const void* send, void* recv, size_t count, DataType type, int root);
  // `recv` is written on the root only (may be null elsewhere).
  Request reduce_async(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                       int root);
  // `count` elements go to each rank: send and recv hold size()*count elements.
  Request all_to_all_async(const void* send, void* recv, size_t count, DataType type);
  Request barrier_async();
  Request send_async(const void* buf, size_t count, DataType type, int peer);
  Request recv_async(void* buf, size_t count, DataType type, int peer);

  void all_reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op);
  void reduce_scatter(const void* send, void* recv, size_t recvcount, DataType type, ReduceOp op);
  void all_gather(const void* send, void* recv, size_t sendcount, DataType type);
  void broadcast(const void* send, void* recv, size_t count, DataType type, int root);
  void reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root);
  void all_to_all(const void* send, void* recv, size_t count, DataType type);
  void barrier();
  void send(const void* buf, size_t count, DataType type, int peer);
  void recv(void* buf, size_t count, DataType type, int peer);

  // ---- the same calls on device buffers, ordered on a stream (NCCL's semantics) ----
  // Each returns at once: the operation runs after the work already queued on `stream`
  // (nullptr: the backend's default stream), and work queued on `stream` afterwards waits
  // for it. Every buffer the call uses must be device memory (strata::alloc, or the
  // backend's own, e.g. cudaMalloc); host memory or a freed buffer is InvalidArgument, as
  // are buffers of both kinds in one call (such a call is refused on every rank, as a null
  // buffer is). The Request completes when the operation is over; wait() throws its error.
  // A device operation that fails (a peer died, a timeout) still releases `stream`, and
  // its error is kept: the next call on this communicator throws it, and async_error()
  // reports it; the communicator can then only be destroyed or aborted.
  // The calls above (without a stream) on device buffers run on the default stream, the
  // blocking ones returning once the operation is over.
  Request all_reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, device::Stream stream);
  Request reduce_scatter(const void* send, void* recv, size_t recvcount, DataType type, ReduceOp op,
                         device::Stream stream);
  Request all_gather(const void* send, void* recv, size_t sendcount, DataType type, device::Stream stream);
  Request broadcast(const void* send, void* recv, size_t count, DataType type, int root, device::Stream stream);
  Request reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root,
                 device::Stream stream);
  Request all_to_all(const void* send, void* recv, size_t count, DataType type, device::Stream stream);
  Request barrier(device::Stream stream);
  // Pre-multiplied sums on device buffers (NCCL's ncclRedOpCreatePreMulSum, PyTorch FSDP's
  // PREMUL_SUM): this rank's input times `op.factor` (scale()'s arithmetic), then summed.
  // The factor is one element of `type`: in host memory it is read when the call is made, in
  // device memory when the operation runs. The input is left as it was.
  Request all_reduce(const void* send, void* recv, size_t count, DataType type, PreMulSum op, device::Stream stream);
  Request reduce_scatter(const void* send, void* recv, size_t recvcount, DataType type, PreMulSum op,
                         device::Stream stream);
  Request reduce(const void* send, void* recv, size_t count, DataType type, PreMulSum op, int root,
                 device::Stream stream);
  // Inside a group they are recorded with their stream: group_end orders the group on every
  // stream its calls named.
  Request send(const void* buf, size_t count, DataType type, int peer, device::Stream stream);
  Request recv(void* buf, size_t count, DataType type, int peer, device::Stream stream);

  // Registered host buffers (as ncclCommRegister / ncclCommDeregister; docs/api.md,
  // "Zero-copy on host memory"): peers on this host read a registered buffer straight
  // from this process's memory instead of through the shared-memory FIFO. Memory from
  // strata::alloc(bytes, MemoryKind::host) is shareable without registering; registering
  // makes other shared memory shareable (a MAP_SHARED mapping of a memfd or /dev/shm file
  // from offset 0). Private memory (malloc, new, the stack) is refused (InvalidArgument
  // saying why), as are null or empty ranges; such buffers keep working unregistered.
  // The handle is for deregister_buffer, which refuses anything but a live handle of this
  // communicator. What is registered when the communicator is destroyed is released.
  // Registration is each rank's own: ranks may register different buffers.
  void* register_buffer(void* buf, size_t bytes);
  void deregister_buffer(void* handle);

  // The first failure of a device operation, which ran after its call returned (as
  // ncclCommGetAsyncError); null while there is none.
  std::exception_ptr async_error() const;

  // Grouped point-to-point: between group_start() and group_end(), send/recv (and their
  // _async forms, which then return an empty Request) only record the operation; group_end
  // posts them all at once so that a pipeline stage can send and receive without deadlock.
  // Within a group a rank may send to and receive from itself. Groups nest. A group's
  // buffers are all host or all device memory; a device group is ordered on the streams
  // its calls named, and group_end_async returns at once as NCCL's ncclGroupEnd does
  // (group_end waits for the group to be over).
  void group_start();
  void group_end();
  Request group_end_async();

 private:
  explicit Comm(std::shared_ptr<CommState> s) : state_(std::move(s)) {}
  CommState& checked() const;
  // Every call goes through these: described once, checked, then run or queued.
  Request start(bool blocking, Collective coll, const void* send, void* recv, size_t count, DataType type,
                ReduceOp op, int root);
  Request start_on(device::Stream stream, Collective coll, const void* send, void* recv, size_t count, DataType type,
                   ReduceOp op, int root, const PreMulSum* premul = nullptr);
  Request end_group(bool blocking);
  std::shared_ptr<CommState> state_;
  friend struct CommState;
};

// Completion of one operation. wait() throws the operation's error, if any.
class Request {
 public:
  Request() = default;
  bool valid() const { return op_ != nullptr; }
  void wait();
  bool test();  // true when complete (and then throws like wait() if it failed)

  struct Op;

 private:
  explicit Request(std::shared_ptr<Op> op) : op_(std::move(op)) {}
  std::shared_ptr<Op> op_;
  friend class OpQueue;
};

}  // namespace strata
