#include "reference.hpp"

#include <cmath>
#include <cstring>

#include "numeric.hpp"

namespace perf {

namespace {

size_t u(int v) { return static_cast<size_t>(v); }

char* at(void* base, size_t elems, DataType t) { return static_cast<char*>(base) + elems * size_of(t); }

// Rank `rank`'s input element of the collective, in the index space of its send data.
double input_of(const CheckSpec& s, int rank, size_t index) {
  const size_t i = index + s.seed;
  return has_op(s.coll) ? reduce_input(s.op, s.type, rank, s.nranks, i) : move_input(rank, i);
}

strata::Geometry geometry_of(const CheckSpec& s) { return buffers(s.coll, s.count, s.nranks, s.rank); }

// Whether the call reads this rank's send buffer (broadcast reads only the root's).
bool reads_send(const CheckSpec& s) {
  const Collective* k = std::get_if<Collective>(&s.coll);
  return !k || strata::info(*k).send != strata::Use::root_only || s.rank == s.root;
}

}  // namespace

double reduce_input(ReduceOp op, DataType t, int rank, int nranks, size_t index) {
  const size_t r = u(rank);
  if (strata::size_of(t) == 1 && is_floating(t)) {  // fp8: see the header
    if (op == ReduceOp::sum) return static_cast<double>((r + index) % 2);
    if (op == ReduceOp::avg) return static_cast<double>(1 + index % 2);
  }
  switch (op) {
    case ReduceOp::sum: return static_cast<double>(1 + (r * 7 + index) % 5);
    case ReduceOp::prod: return (r + index) % 3 == 0 ? 2.0 : 1.0;
    case ReduceOp::max:
    case ReduceOp::min: return static_cast<double>(1 + (r * 13 + index * 7) % 31);
    case ReduceOp::avg: {
      // base + d, where the d of ranks 2j and 2j+1 cancel: the sum is exactly nranks*base.
      const double base = static_cast<double>(3 + index % 13);
      const double d = static_cast<double>(index % 3);
      if (rank % 2 == 1) return base - d;
      if (rank + 1 < nranks) return base + d;
      return base;
    }
  }
  return 0;
}

double move_input(int rank, size_t index) {
  return static_cast<double>(1 + (u(rank) * 37 + index * 11) % 61);
}

double reduced_value(ReduceOp op, DataType t, int nranks, size_t index) {
  double acc = reduce_input(op, t, 0, nranks, index);
  for (int r = 1; r < nranks; ++r) {
    const double v = reduce_input(op, t, r, nranks, index);
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: acc += v; break;
      case ReduceOp::prod: acc *= v; break;
      case ReduceOp::max: acc = v > acc ? v : acc; break;
      case ReduceOp::min: acc = v < acc ? v : acc; break;
    }
  }
  if (op == ReduceOp::avg) {
    acc /= nranks;
    if (!is_floating(t)) acc = std::trunc(acc);
  }
  return acc;
}

CallBuffers call_buffers(const CheckSpec& s, void* sendbuf, void* recvbuf) {
  if (!s.in_place) return {sendbuf, recvbuf};
  const strata::Geometry g = geometry_of(s);
  const size_t off = g.in_place_offset;
  switch (g.in_place) {
    case strata::InPlace::send_in_recv: return {at(recvbuf, off, s.type), recvbuf};
    case strata::InPlace::recv_in_send: return {recvbuf, at(recvbuf, off, s.type)};
    default: return {recvbuf, recvbuf};
  }
}

void prepare_input(const CheckSpec& s, void* sendbuf, void* recvbuf) {
  const strata::Geometry g = geometry_of(s);
  const size_t zero = s.in_place ? (g.send_count > g.recv_count ? g.send_count : g.recv_count) : g.recv_count;
  std::memset(recvbuf, 0, zero * size_of(s.type));
  if (!reads_send(s)) return;
  void* dst = const_cast<void*>(call_buffers(s, sendbuf, recvbuf).send);
  for (size_t i = 0; i < g.send_count; ++i) store(s.type, dst, i, input_of(s, s.rank, i));
}

size_t touched_bytes(const CheckSpec& s) {
  const strata::Geometry g = geometry_of(s);
  return (g.send_count > g.recv_count ? g.send_count : g.recv_count) * size_of(s.type);
}

double expected_value(const CheckSpec& s, size_t k) {
  const int n = s.nranks;
  const size_t c = s.count;
  double v = 0;
  if (const P2p* p = std::get_if<P2p>(&s.coll)) {
    if (*p == P2p::sendrecv)
      v = move_input((s.rank - 1 + n) % n, k + s.seed);
    else  // pipeline: rank 0 receives nothing, its buffer stays zero
      v = s.rank == 0 ? 0.0 : move_input(s.rank - 1, k + s.seed);
    return round_to(s.type, v);
  }
  switch (std::get<Collective>(s.coll)) {
    case Collective::all_reduce:
      v = reduced_value(s.op, s.type, n, k + s.seed);
      break;
    case Collective::reduce_scatter:
      v = reduced_value(s.op, s.type, n, u(s.rank) * c + k + s.seed);
      break;
    case Collective::reduce:
      if (s.rank == s.root)
        v = reduced_value(s.op, s.type, n, k + s.seed);
      else  // untouched: zero out of place, this rank's own input in place
        v = s.in_place ? input_of(s, s.rank, k) : 0.0;
      break;
    case Collective::all_gather:
      v = move_input(static_cast<int>(k / c), k % c + s.seed);
      break;
    case Collective::broadcast:
      v = move_input(s.root, k + s.seed);
      break;
    case Collective::all_to_all:
      v = move_input(static_cast<int>(k / c), u(s.rank) * c + k % c + s.seed);
      break;
    case Collective::barrier:
    case Collective::send:
    case Collective::recv:
      break;  // not timed (all_colls)
  }
  return round_to(s.type, v);
}

int64_t count_wrong(const CheckSpec& s, const void* recvbuf) {
  const void* data = call_buffers(s, nullptr, const_cast<void*>(recvbuf)).recv;
  const bool tolerant = s.op == ReduceOp::avg && has_op(s.coll) && is_floating(s.type);
  const double tol = epsilon(s.type) * 2.0 * (s.nranks + 1);
  const size_t n = geometry_of(s).recv_count;
  int64_t wrong = 0;
  for (size_t k = 0; k < n; ++k) {
    const double want = expected_value(s, k);
    const double got = load(s.type, data, k);
    if (got == want) continue;
    if (tolerant && std::fabs(got - want) <= tol * std::fabs(want)) continue;
    ++wrong;
  }
  return wrong;
}

}  // namespace perf
