// What a driver can time, and the facts nccl-tests adds to the library's tables: how a
// sweep size turns into the call's count, and the bus-bandwidth factor. Names, operator,
// root and buffer geometry of the collectives come from include/strata/collective.hpp
// (header-only: the peer drivers do not link libstrata).
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <variant>
#include <vector>

#include "strata/collective.hpp"
#include "strata/types.hpp"

namespace perf {

using strata::Collective;
using strata::DataType;
using strata::ReduceOp;

// nccl-tests' point-to-point patterns, built from the library's send and recv.
// sendrecv is the ring shift (rank r sends to r+1 and receives from r-1, with the
// wrap-around, so 2 ranks send both ways at once). pipeline is the same shift without the
// wrap-around: rank 0 only sends, the last rank only receives, as activations flow in
// pipeline parallelism; on 2 ranks it is one-way, what `ucx_perftest -t tag_bw` times.
enum class P2p { sendrecv, pipeline };

// Whom this rank sends to and receives from in a pattern: the ring shift's neighbours; the
// pipeline's ends have none (-1): rank 0 only sends, the last rank only receives.
struct P2pPeers {
  int send_to = -1;
  int recv_from = -1;
};
P2pPeers p2p_peers(P2p p, int rank, int nranks);

// One of the library's collectives (all_reduce ... all_to_all), or a point-to-point pattern.
using Coll = std::variant<Collective, P2p>;

// Every one a driver can time, in the order messages list them.
const std::vector<Coll>& all_colls();

const char* name(P2p p);           // "sendrecv", "pipeline"
const char* name(const Coll& c);   // the library's name, or the pattern's
// Accepts the names above, nccl-tests' binary names ("all_reduce_perf") and its
// spellings "alltoall" and "send_recv".
std::optional<Coll> parse_coll(std::string_view s);

bool has_op(const Coll& c);    // takes a reduction operator (all_reduce, reduce_scatter, reduce)
bool has_root(const Coll& c);  // broadcast, reduce
// nccl-tests does not validate in-place all_to_all and sendrecv ("N/A"); nor pipeline here.
bool checks_in_place(const Coll& c);

// The call's count for a row of `elements` (= size / sizeof(type)), as nccl-tests'
// getCollByteCount: a collective whose buffer holds one block per rank (reduce_scatter,
// all_gather, all_to_all) gets elements / nranks; the others the whole.
size_t call_count(const Coll& c, size_t elements, int nranks);

// One rank's buffers for a call of `count`, from the library's geometry. perf fills,
// zeroes and checks every rank's buffers as the root's (a non-root's reduce output must
// stay untouched, and is checked), so a rooted collective is asked for with root = rank.
// The patterns send and receive `count` elements, in place in one buffer.
strata::Geometry buffers(const Coll& c, size_t count, int nranks, int rank);

// The table's "size" column: the largest buffer of the call, in bytes.
size_t row_bytes(const Coll& c, size_t count, int nranks, size_t elem_size);

// busbw = algbw * factor: 2(n-1)/n for all_reduce; (n-1)/n for reduce_scatter,
// all_gather, all_to_all; 1 for broadcast, reduce, sendrecv, pipeline.
double busbw_factor(const Coll& c, int nranks);

// algbw (GB/s, 1e9) = size bytes / seconds; busbw = algbw * busbw_factor.
struct Bandwidth {
  double algbw = 0;
  double busbw = 0;
};
Bandwidth bandwidth(const Coll& c, size_t bytes, double seconds, int nranks);

}  // namespace perf
