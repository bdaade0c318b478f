#include "ground/call.hpp"

#include <cstdint>
#include <optional>
#include <string>

#include "ground/device/backend.hpp"
#include "strata/error.hpp"

namespace strata {

namespace {

[[noreturn]] void invalid(Collective c, const std::string& what) {
  throw InvalidArgument(std::string(name(c)) + ": " + what);
}

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

bool null_where_used(const void* p, size_t used) { return used > 0 && !p; }

// Used on this rank, the two buffers are either the call's in-place form or disjoint.
bool overlaps(const Call& k) {
  if (k.in_place || k.geo.send_count == 0 || k.geo.recv_count == 0) return false;
  auto s = reinterpret_cast<uintptr_t>(k.send), r = reinterpret_cast<uintptr_t>(k.recv);
  const size_t esz = size_of(k.type);
  return s < r + k.geo.recv_count * esz && r < s + k.geo.send_count * esz;
}

// The kind of each buffer this rank uses (nullopt: unused or null), from `b`'s pointer query.
struct BufferKinds {
  std::optional<MemoryKind> send, recv;
};
BufferKinds kinds_of(const Call& k, device::Backend& b) {
  auto kind = [&](const void* p, size_t used) -> std::optional<MemoryKind> {
    if (!p || used == 0) return std::nullopt;
    return b.memory().query(p).kind;
  };
  return {kind(k.send, k.geo.send_count), kind(k.recv, k.geo.recv_count)};
}

// Sets k.memory from its buffers, or the fault of buffers that do not fit the call.
void classify_memory(Call& k, device::Backend& b, bool on_stream) {
  const BufferKinds kinds = kinds_of(k, b);
  const auto is = [](std::optional<MemoryKind> m, MemoryKind want) { return m && *m == want; };
  const bool any_device = is(kinds.send, MemoryKind::device) || is(kinds.recv, MemoryKind::device);
  const bool any_host = is(kinds.send, MemoryKind::host) || is(kinds.recv, MemoryKind::host);
  if (any_device && any_host) k.fault = Fault::mixed_memory;
  else if (on_stream && any_host) k.fault = Fault::not_device;
  k.memory = on_stream || any_device ? MemoryKind::device : MemoryKind::host;
}

std::string range_text(int root, int nranks) {
  return std::to_string(root) + " is not a rank of this communicator (size " + std::to_string(nranks) + ")";
}

}  // namespace

const char* summary(Fault f) {
  switch (f) {
    case Fault::none: return "no fault";
    case Fault::null_buffer: return "a null buffer";
    case Fault::overlap: return "overlapping send and receive buffers that are not in place";
    case Fault::bad_peer: return "a peer that is not a rank of the communicator";
    case Fault::in_group: return "a collective inside group_start/group_end";
    case Fault::self_group: return "sends to itself that its receives from itself do not match";
    case Fault::mismatch: return "calls that differ between ranks (STRATA_CHECK)";
    case Fault::mixed_memory: return "buffers of different memory kinds (host and device) in one call";
    case Fault::not_device: return "a buffer that is not device memory in a call on a stream";
  }
  return "an unknown fault";
}

ErrorKind kind_of(Fault f) { return f == Fault::in_group ? ErrorKind::invalid_usage : ErrorKind::invalid_argument; }

void throw_fault(Fault f, const std::string& what) {
  if (kind_of(f) == ErrorKind::invalid_usage) throw InvalidUsage(what);
  throw InvalidArgument(what);
}

Call describe(Collective coll, const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root,
              int rank, int nranks, bool on_stream, void* stream) {
  const CollectiveInfo& info = strata::info(coll);
  if (!is_valid(type)) invalid(coll, "unknown data type " + std::to_string(static_cast<int>(type)));
  check_count(coll, count, type, nranks);
  if (info.has_op && !is_valid(op)) invalid(coll, "unknown reduction op " + std::to_string(static_cast<int>(op)));
  const bool root_ok = !info.has_root || (root >= 0 && root < nranks);
  // A collective's root is the same on every rank; a send/recv peer is this rank's own.
  if (!root_ok && !is_p2p(coll)) invalid(coll, "root " + range_text(root, nranks));
  Call k;
  k.coll = coll;
  k.send = send;
  k.recv = recv;
  k.count = count;
  k.type = type;
  k.op = info.has_op ? op : ReduceOp::sum;
  k.root = info.has_root ? root : 0;
  k.stream = stream;
  if (on_stream) k.memory = MemoryKind::device;
  if (!root_ok) {
    k.fault = Fault::bad_peer;
    return k;
  }
  k.geo = geometry(coll, count, nranks, rank, k.root);
  k.in_place = is_in_place(k.geo, send, recv, size_of(type));
  if (null_where_used(send, k.geo.send_count) || null_where_used(recv, k.geo.recv_count)) k.fault = Fault::null_buffer;
  else if (overlaps(k)) k.fault = Fault::overlap;
  // A stream call needs the backend; without one, only a backend some earlier call loaded
  // can have handed out device memory.
  device::Backend* b = on_stream ? &device::require_backend(name(coll)) : device::loaded_backend();
  if (b && k.fault == Fault::none) classify_memory(k, *b, on_stream);
  return k;
}

std::string fault_message(const Call& k, int nranks) {
  const std::string call = std::string(name(k.coll)) + ": ";
  switch (k.fault) {
    case Fault::null_buffer: {
      const bool send_null = null_where_used(k.send, k.geo.send_count);
      const char* which = is_p2p(k.coll) ? "buffer" : send_null ? "send buffer" : "recv buffer";
      return call + which + " is null with count " + std::to_string(k.count);
    }
    case Fault::overlap: return call + "send and receive buffers overlap but are not in place";
    case Fault::bad_peer: return call + "peer " + range_text(k.root, nranks);
    case Fault::in_group: return call + "collectives cannot be called inside group_start/group_end";
    case Fault::mixed_memory:
    case Fault::not_device: {
      device::Backend* b = device::loaded_backend();
      const BufferKinds kinds = b ? kinds_of(k, *b) : BufferKinds{};
      const auto text = [&](const char* which, const void* p, std::optional<MemoryKind> m) {
        return std::string(which) + " " + device::address_text(p) + " is " +
               (m == MemoryKind::device ? "device memory" : "host memory (or device memory already freed)");
      };
      const char* send_name = is_p2p(k.coll) ? "buffer" : "send buffer";
      const char* recv_name = is_p2p(k.coll) ? "buffer" : "recv buffer";
      std::string parts;
      if (kinds.send) parts = text(send_name, k.send, kinds.send);
      if (kinds.recv) parts += (parts.empty() ? "" : " and ") + text(recv_name, k.recv, kinds.recv);
      return call + parts + (k.fault == Fault::mixed_memory ? ": a call's buffers must all be host or all device memory"
                                                           : ", and a call on a stream takes device memory only");
    }
    default: return call + summary(k.fault);
  }
}

}  // namespace strata
