#include "reference.hpp"

#include <cmath>
#include <cstring>

#include "numeric.hpp"

namespace perf {

namespace {

size_t u(int v) { return static_cast<size_t>(v); }

char* at(void* base, size_t elems, DType t) { return static_cast<char*>(base) + elems * size_of(t); }

const void* at(const void* base, size_t elems, DType t) {
  return static_cast<const char*>(base) + elems * size_of(t);
}

// Rank `rank`'s input element of the collective, in the index space of its send data.
double input_of(const CheckSpec& s, int rank, size_t index) {
  const size_t i = index + s.seed;
  return has_op(s.coll) ? reduce_input(s.op, rank, s.nranks, i) : move_input(rank, i);
}

}  // namespace

double reduce_input(RedOp op, int rank, int nranks, size_t index) {
  const size_t r = u(rank);
  switch (op) {
    case RedOp::sum: return static_cast<double>(1 + (r * 7 + index) % 5);
    case RedOp::prod: return (r + index) % 3 == 0 ? 2.0 : 1.0;
    case RedOp::max:
    case RedOp::min: return static_cast<double>(1 + (r * 13 + index * 7) % 31);
    case RedOp::avg: {
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

double reduced_value(RedOp op, DType t, int nranks, size_t index) {
  double acc = reduce_input(op, 0, nranks, index);
  for (int r = 1; r < nranks; ++r) {
    const double v = reduce_input(op, r, nranks, index);
    switch (op) {
      case RedOp::sum:
      case RedOp::avg: acc += v; break;
      case RedOp::prod: acc *= v; break;
      case RedOp::max: acc = v > acc ? v : acc; break;
      case RedOp::min: acc = v < acc ? v : acc; break;
    }
  }
  if (op == RedOp::avg) {
    acc /= nranks;
    if (!is_floating(t)) acc = std::trunc(acc);
  }
  return acc;
}

CallBuffers call_buffers(const CheckSpec& s, void* sendbuf, void* recvbuf) {
  if (!s.in_place) return {sendbuf, recvbuf};
  return {at(recvbuf, s.layout.send_inplace_off * u(s.rank), s.type),
          at(recvbuf, s.layout.recv_inplace_off * u(s.rank), s.type)};
}

void prepare_input(const CheckSpec& s, void* sendbuf, void* recvbuf) {
  const Layout& l = s.layout;
  const size_t zero = s.in_place ? (l.send_count > l.recv_count ? l.send_count : l.recv_count)
                                 : l.recv_count;
  std::memset(recvbuf, 0, zero * size_of(s.type));
  if (s.coll == Coll::broadcast && s.rank != s.root) return;  // only the root's data is read
  void* dst = const_cast<void*>(call_buffers(s, sendbuf, recvbuf).send);
  for (size_t i = 0; i < l.send_count; ++i) store(s.type, dst, i, input_of(s, s.rank, i));
}

double expected_value(const CheckSpec& s, size_t k) {
  const Layout& l = s.layout;
  const int n = s.nranks;
  double v = 0;
  switch (s.coll) {
    case Coll::all_reduce:
      v = reduced_value(s.op, s.type, n, k + s.seed);
      break;
    case Coll::reduce_scatter:
      v = reduced_value(s.op, s.type, n, u(s.rank) * l.recv_count + k + s.seed);
      break;
    case Coll::reduce:
      if (s.rank == s.root)
        v = reduced_value(s.op, s.type, n, k + s.seed);
      else  // untouched: zero out of place, this rank's own input in place
        v = s.in_place ? input_of(s, s.rank, k) : 0.0;
      break;
    case Coll::all_gather: {
      const size_t c = l.param_count;
      v = move_input(static_cast<int>(k / c), k % c + s.seed);
      break;
    }
    case Coll::broadcast:
      v = move_input(s.root, k + s.seed);
      break;
    case Coll::all_to_all: {
      const size_t c = l.param_count;
      v = move_input(static_cast<int>(k / c), u(s.rank) * c + k % c + s.seed);
      break;
    }
    case Coll::sendrecv:
      v = move_input((s.rank - 1 + n) % n, k + s.seed);
      break;
    case Coll::pipeline:  // rank 0 receives nothing: its buffer stays zero
      v = s.rank == 0 ? 0.0 : move_input(s.rank - 1, k + s.seed);
      break;
  }
  return round_to(s.type, v);
}

int64_t count_wrong(const CheckSpec& s, const void* recvbuf) {
  const void* data = s.in_place ? at(recvbuf, s.layout.recv_inplace_off * u(s.rank), s.type) : recvbuf;
  const bool tolerant = s.op == RedOp::avg && has_op(s.coll) && is_floating(s.type);
  const double tol = epsilon(s.type) * 2.0 * (s.nranks + 1);
  int64_t wrong = 0;
  for (size_t k = 0; k < s.layout.recv_count; ++k) {
    const double want = expected_value(s, k);
    const double got = load(s.type, data, k);
    if (got == want) continue;
    if (tolerant && std::fabs(got - want) <= tol * std::fabs(want)) continue;
    ++wrong;
  }
  return wrong;
}

}  // namespace perf
