#include "ground/call.hpp"

#include <cstdint>
#include <string>

#include "strata/error.hpp"

namespace strata {

namespace {

[[noreturn]] void invalid(Collective c, const std::string& what) { throw InvalidArgument(std::string(name(c)) + ": " + what); }

bool is_p2p(Collective c) { return c == Collective::send || c == Collective::recv; }

// count elements of `t`, times the blocks of the largest buffer, must fit in an address
// space (kMaxBufferBytes). It depends only on what every rank passes alike, so every rank
// refuses the same calls. A multiplication, not a division by the limit: this runs on
// every call.
void check_count(Collective c, size_t count, DataType t, int nranks) {
  size_t bytes = 0;
  if (__builtin_mul_overflow(count, size_of(t) * blocks_per_buffer(c, nranks), &bytes) || bytes > kMaxBufferBytes)
    invalid(c, "count " + std::to_string(count) + " of " + name(t) + " is larger than any buffer can be (" +
                   (blocks_per_buffer(c, nranks) > 1 ? std::to_string(nranks) + " blocks of it " : std::string()) +
                   "over 2^47 bytes, 128 TiB)");
}

void check_buffer(Collective c, const char* which, const void* p, size_t used, size_t count) {
  if (used > 0 && !p)
    invalid(c, std::string(is_p2p(c) ? "buffer" : which) + " is null with count " + std::to_string(count));
}

// Used on this rank, the two buffers are either the call's in-place form or disjoint.
void check_overlap(const Call& k) {
  if (k.in_place || k.geo.send_count == 0 || k.geo.recv_count == 0) return;
  auto s = reinterpret_cast<uintptr_t>(k.send), r = reinterpret_cast<uintptr_t>(k.recv);
  const size_t esz = size_of(k.type);
  if (s < r + k.geo.recv_count * esz && r < s + k.geo.send_count * esz)
    invalid(k.coll, "send and receive buffers overlap but are not in place");
}

}  // namespace

Call describe(Collective coll, const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root,
              int rank, int nranks) {
  const CollectiveInfo& info = strata::info(coll);
  if (!is_valid(type)) invalid(coll, "unknown data type " + std::to_string(static_cast<int>(type)));
  check_count(coll, count, type, nranks);
  if (info.has_op && !is_valid(op)) invalid(coll, "unknown reduction op " + std::to_string(static_cast<int>(op)));
  if (info.has_root && (root < 0 || root >= nranks))
    invalid(coll, std::string(is_p2p(coll) ? "peer " : "root ") + std::to_string(root) +
                      " is not a rank of this communicator (size " + std::to_string(nranks) + ")");
  Call k;
  k.coll = coll;
  k.send = send;
  k.recv = recv;
  k.count = count;
  k.type = type;
  k.op = info.has_op ? op : ReduceOp::sum;
  k.root = info.has_root ? root : 0;
  k.geo = geometry(coll, count, nranks, rank, k.root);
  check_buffer(coll, "send buffer", send, k.geo.send_count, count);
  check_buffer(coll, "recv buffer", recv, k.geo.recv_count, count);
  k.in_place = is_in_place(k.geo, send, recv, size_of(type));
  check_overlap(k);
  return k;
}

}  // namespace strata
