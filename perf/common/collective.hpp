// The collectives a driver can time, and for each the facts nccl-tests uses: how a
// sweep size turns into send/recv/parameter counts, where the in-place buffers sit,
// and the bus-bandwidth factor.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace perf {

// sendrecv is nccl-tests' ring shift (rank r sends to r+1 and receives from r-1, with the
// wrap-around, so 2 ranks send both ways at once). pipeline is the same shift without
// the wrap-around: rank 0 only sends, the last rank only receives, as activations flow
// in pipeline parallelism; on 2 ranks it is one-way, what `ucx_perftest -t tag_bw` times.
enum class Coll { all_reduce, reduce_scatter, all_gather, broadcast, reduce, all_to_all, sendrecv, pipeline };
inline constexpr int kNumColls = static_cast<int>(Coll::pipeline) + 1;  // keep the last one here

const char* name(Coll c);  // "all_reduce", ...
// Accepts our names, nccl-tests' binary names ("all_reduce_perf") and "alltoall".
std::optional<Coll> parse_coll(std::string_view s);

bool has_op(Coll c);    // takes a reduction operator (all_reduce, reduce_scatter, reduce)
bool has_root(Coll c);  // broadcast, reduce
// nccl-tests does not validate in-place all_to_all and sendrecv ("N/A"); nor pipeline here.
bool checks_in_place(Coll c);

// Element counts for one row, derived as nccl-tests' getCollByteCount does from
// count = size / sizeof(type) and the number of ranks.
struct Layout {
  size_t send_count = 0;        // elements read from the send buffer
  size_t recv_count = 0;        // elements written to (and checked in) the recv buffer
  size_t param_count = 0;       // the count argument of the call; the table's "count"
  size_t send_inplace_off = 0;  // in-place: send = recvbuf + send_inplace_off * rank
  size_t recv_inplace_off = 0;  // in-place: recv = recvbuf + recv_inplace_off * rank

  // The table's "size" column: max(send, recv) bytes.
  size_t bytes(size_t elem_size) const {
    return (send_count > recv_count ? send_count : recv_count) * elem_size;
  }
};

Layout layout_for(Coll c, size_t count, int nranks);

// busbw = algbw * factor: 2(n-1)/n for all_reduce; (n-1)/n for reduce_scatter,
// all_gather, all_to_all; 1 for broadcast, reduce, sendrecv, pipeline.
double busbw_factor(Coll c, int nranks);

// algbw (GB/s, 1e9) = size bytes / seconds; busbw = algbw * busbw_factor.
struct Bandwidth {
  double algbw = 0;
  double busbw = 0;
};
Bandwidth bandwidth(Coll c, size_t bytes, double seconds, int nranks);

}  // namespace perf
