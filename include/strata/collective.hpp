// The operations and their buffer geometry, written once: the library's argument checks
// and call description, strata-perf and the tests all derive from this table. NCCL's
// meaning of `count` throughout: all_reduce, broadcast, reduce: the vector;
// reduce_scatter: the block each rank receives; all_gather: the block each rank sends;
// all_to_all: the block sent to each rank; send, recv: the message.
// Header-only, so tools that do not link libstrata use the same facts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace strata {

enum class Collective : int { all_reduce, reduce_scatter, all_gather, broadcast, reduce, all_to_all, barrier, send, recv };
inline constexpr int kNumCollectives = 9;

// What "in place" means for a call, i.e. which address the other buffer then has.
enum class InPlace : uint8_t {
  none,          // no in-place form (barrier, send, recv)
  same,          // send == recv
  send_in_recv,  // all_gather: send == recv + rank * count elements
  recv_in_send,  // reduce_scatter: recv == send + rank * count elements
};

// Which of a call's buffers a rank uses.
enum class Use : uint8_t {
  none,       // never (the pointer may be null)
  every,      // on every rank
  root_only,  // on the root only (broadcast's send, reduce's recv)
};

struct CollectiveInfo {
  const char* name;
  bool has_op;    // takes a reduction operator
  bool has_root;  // takes a root (broadcast, reduce) or a peer (send, recv)
  Use send, recv;
  bool send_per_rank, recv_per_rank;  // the buffer holds one block of `count` per rank
  InPlace in_place;
};

// Indexed by Collective.
inline constexpr CollectiveInfo kCollectives[kNumCollectives] = {
    // name           op     root   send             recv             send/rank recv/rank in place
    {"all_reduce",     true,  false, Use::every,     Use::every,     false, false, InPlace::same},
    {"reduce_scatter", true,  false, Use::every,     Use::every,     true,  false, InPlace::recv_in_send},
    {"all_gather",     false, false, Use::every,     Use::every,     false, true,  InPlace::send_in_recv},
    {"broadcast",      false, true,  Use::root_only, Use::every,     false, false, InPlace::same},
    {"reduce",         true,  true,  Use::every,     Use::root_only, false, false, InPlace::same},
    {"all_to_all",     false, false, Use::every,     Use::every,     true,  true,  InPlace::same},
    {"barrier",        false, false, Use::none,      Use::none,      false, false, InPlace::none},
    {"send",           false, true,  Use::every,     Use::none,      false, false, InPlace::none},
    {"recv",           false, true,  Use::none,      Use::every,     false, false, InPlace::none},
};

inline bool is_valid(Collective c) { return static_cast<int>(c) >= 0 && static_cast<int>(c) < kNumCollectives; }
inline const CollectiveInfo& info(Collective c) { return kCollectives[static_cast<int>(c)]; }
inline const char* name(Collective c) { return is_valid(c) ? info(c).name : "invalid"; }
inline std::optional<Collective> parse_collective(std::string_view s) {
  for (int i = 0; i < kNumCollectives; ++i)
    if (s == kCollectives[i].name) return static_cast<Collective>(i);
  return std::nullopt;
}

// One rank's buffers for one call, in elements.
struct Geometry {
  size_t send_count = 0;  // read from send (0: send is not used on this rank)
  size_t recv_count = 0;  // written into recv (0: recv is not used on this rank)
  InPlace in_place = InPlace::none;
  size_t in_place_offset = 0;  // elements; see InPlace
};

// No buffer is larger than this many bytes: 2^47, 128 TiB, the user address space of x86-64
// with 4-level page tables (AArch64's with 48-bit addresses is 256 TiB). A call whose
// largest buffer would be larger is refused on every rank alike, whatever its pointers:
// such a count is a bug (or garbage), and moving data for it would fault or wrap.
inline constexpr size_t kMaxBufferBytes = size_t{1} << 47;

// The largest buffer any rank passes to this call holds count * this many elements.
inline size_t blocks_per_buffer(Collective c, int nranks) {
  const CollectiveInfo& i = info(c);
  return (i.send_per_rank || i.recv_per_rank) ? static_cast<size_t>(nranks > 0 ? nranks : 1) : 1;
}

// Assumes count * blocks_per_buffer(c, nranks) does not overflow (the library checks it).
inline Geometry geometry(Collective c, size_t count, int nranks, int rank, int root) {
  const CollectiveInfo& i = info(c);
  const size_t n = static_cast<size_t>(nranks > 0 ? nranks : 1);
  auto used = [&](Use u) { return u == Use::every || (u == Use::root_only && rank == root); };
  Geometry g;
  g.send_count = used(i.send) ? count * (i.send_per_rank ? n : 1) : 0;
  g.recv_count = used(i.recv) ? count * (i.recv_per_rank ? n : 1) : 0;
  g.in_place = i.in_place;
  if (i.in_place == InPlace::send_in_recv || i.in_place == InPlace::recv_in_send)
    g.in_place_offset = count * static_cast<size_t>(rank > 0 ? rank : 0);
  return g;
}

// Whether `send` and `recv` are the call's in-place form (elements of `elem_size` bytes).
inline bool is_in_place(const Geometry& g, const void* send, const void* recv, size_t elem_size) {
  // As integers: for an impossible count the offset runs past any object, and pointer
  // arithmetic that overflows is undefined (the call is then refused for its count).
  const auto s = reinterpret_cast<uintptr_t>(send);
  const auto r = reinterpret_cast<uintptr_t>(recv);
  switch (g.in_place) {
    case InPlace::none: return false;
    case InPlace::same: return s == r;
    case InPlace::send_in_recv: return r && s == r + g.in_place_offset * elem_size;
    case InPlace::recv_in_send: return s && r == s + g.in_place_offset * elem_size;
  }
  return false;
}

}  // namespace strata
