// A plan: what one rank does for one collective, as data. Algorithms (algorithms/)
// build plans; the engine executes them over links. A plan is a sequence of rounds; in
// each round the local steps run first, in order, then every transfer of the round is
// posted at once and the round ends when all of them have completed. Offsets and counts
// are in elements of the operation's type.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace strata {

// `absolute`: the offset is an address (grouped point-to-point on the caller's buffers).
enum class Buf : uint8_t { input, output, scratch, absolute };

struct Ref {
  Buf buf;
  size_t offset;
};

enum class StepKind : uint8_t {
  send,         // src -> peer
  recv,         // peer -> dst
  recv_reduce,  // dst = src (op) data from peer; src is dst itself or disjoint from it
  copy,         // src -> dst (skipped when they are the same memory)
  reduce,       // dst = dst (op) src, local
  finalize,     // the op's last step on dst (avg: divide by the number of ranks)
  // recv_reduce, then dst is sent back to the same peer (after the sends posted before it);
  // the link forwards each piece as it is reduced, while it is in cache. Only for links
  // that forward (Link::forwards) and ops without a finalize step.
  recv_reduce_send,
};

struct Step {
  StepKind kind;
  int peer;  // transfers only
  Ref src, dst;
  size_t count;
};

struct Plan {
  const char* algo = "";
  std::vector<Step> steps;
  std::vector<uint32_t> round_begin;  // index of each round's first step
  size_t scratch_count = 0;           // elements of scratch the plan needs

  size_t rounds() const { return round_begin.size(); }
  size_t round_end(size_t r) const { return r + 1 < round_begin.size() ? round_begin[r + 1] : steps.size(); }

  // Builders. Zero-element steps are dropped: both sides of a transfer compute the same
  // count, so both drop it.
  void new_round() { round_begin.push_back(static_cast<uint32_t>(steps.size())); }
  void send(int peer, Ref src, size_t n) { add({StepKind::send, peer, src, {}, n}); }
  void recv(int peer, Ref dst, size_t n) { add({StepKind::recv, peer, {}, dst, n}); }
  void recv_reduce(int peer, Ref dst, size_t n) { recv_reduce(peer, dst, dst, n); }
  // dst = local (op) incoming: the local operand is read where it is, not copied to dst first.
  void recv_reduce(int peer, Ref local, Ref dst, size_t n) { add({StepKind::recv_reduce, peer, local, dst, n}); }
  void recv_reduce_send(int peer, Ref local, Ref dst, size_t n) {
    add({StepKind::recv_reduce_send, peer, local, dst, n});
  }
  void copy(Ref src, Ref dst, size_t n) { add({StepKind::copy, -1, src, dst, n}); }
  void reduce(Ref src, Ref dst, size_t n) { add({StepKind::reduce, -1, src, dst, n}); }
  void finalize(Ref dst, size_t n) { add({StepKind::finalize, -1, {}, dst, n}); }
  void need_scratch(size_t n) { scratch_count = std::max(scratch_count, n); }

 private:
  void add(const Step& s) {
    if (s.count == 0) return;
    if (round_begin.empty()) new_round();
    steps.push_back(s);
  }
};

// The ranks a plan's transfers address, ascending: whom it needs links to.
inline std::vector<int> plan_peers(const Plan& plan) {
  std::vector<int> peers;
  for (const Step& s : plan.steps)
    if (s.peer >= 0) peers.push_back(s.peer);
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  return peers;
}

// What an executor keeps per plan between calls (the engine: its store choice, learnt over
// the plan's calls). Whoever caches plans holds one beside each plan without knowing what
// it is.
struct PlanSlot {
  virtual ~PlanSlot() = default;
};

// Element range of block i when n elements are cut into `parts` nearly equal blocks.
inline size_t block_begin(size_t n, int parts, int i) {
  return static_cast<size_t>((static_cast<unsigned __int128>(n) * static_cast<unsigned>(i)) /
                             static_cast<unsigned>(parts));
}
inline size_t block_size(size_t n, int parts, int i) { return block_begin(n, parts, i + 1) - block_begin(n, parts, i); }
inline int mod(int a, int n) { return ((a % n) + n) % n; }

}  // namespace strata
