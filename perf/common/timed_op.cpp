#include "timed_op.hpp"

#include <string>

namespace perf {

namespace {

// The library's collectives that take a count and buffers (not barrier, send, recv).
constexpr Collective kTimed[] = {Collective::all_reduce, Collective::reduce_scatter, Collective::all_gather,
                                 Collective::broadcast,  Collective::reduce,         Collective::all_to_all};

}  // namespace

const std::vector<Coll>& all_colls() {
  static const std::vector<Coll> v = [] {
    std::vector<Coll> out(std::begin(kTimed), std::end(kTimed));
    out.push_back(P2p::sendrecv);
    out.push_back(P2p::pipeline);
    return out;
  }();
  return v;
}

const char* name(P2p p) { return p == P2p::sendrecv ? "sendrecv" : "pipeline"; }

P2pPeers p2p_peers(P2p p, int rank, int nranks) {
  const bool ring = p == P2p::sendrecv;
  P2pPeers peers;
  if (ring || rank + 1 < nranks) peers.send_to = (rank + 1) % nranks;
  if (ring || rank > 0) peers.recv_from = (rank - 1 + nranks) % nranks;
  return peers;
}

const char* name(const Coll& c) {
  return std::visit([](auto x) { return name(x); }, c);
}

std::optional<Coll> parse_coll(std::string_view s) {
  constexpr std::string_view suffix = "_perf";
  if (s.size() > suffix.size() && s.ends_with(suffix)) s.remove_suffix(suffix.size());
  // nccl-tests' spellings of two of them.
  if (s == "alltoall") return Collective::all_to_all;
  if (s == "send_recv") return P2p::sendrecv;
  for (const Coll& c : all_colls())
    if (s == name(c)) return c;
  return std::nullopt;
}

bool has_op(const Coll& c) {
  const Collective* k = std::get_if<Collective>(&c);
  return k && strata::info(*k).has_op;
}

bool has_root(const Coll& c) {
  const Collective* k = std::get_if<Collective>(&c);
  return k && strata::info(*k).has_root;
}

bool checks_in_place(const Coll& c) {
  return c != Coll(Collective::all_to_all) && !std::holds_alternative<P2p>(c);
}

size_t call_count(const Coll& c, size_t elements, int nranks) {
  const Collective* k = std::get_if<Collective>(&c);
  return k ? elements / strata::blocks_per_buffer(*k, nranks) : elements;
}

strata::Geometry buffers(const Coll& c, size_t count, int nranks, int rank) {
  if (const Collective* k = std::get_if<Collective>(&c)) return strata::geometry(*k, count, nranks, rank, rank);
  strata::Geometry g;
  g.send_count = g.recv_count = count;
  g.in_place = strata::InPlace::same;
  return g;
}

size_t row_bytes(const Coll& c, size_t count, int nranks, size_t elem_size) {
  const Collective* k = std::get_if<Collective>(&c);
  return count * (k ? strata::blocks_per_buffer(*k, nranks) : 1) * elem_size;
}

double busbw_factor(const Coll& c, int nranks) {
  const double n = nranks > 0 ? nranks : 1;
  const Collective* k = std::get_if<Collective>(&c);
  if (!k) return 1.0;  // the patterns
  switch (*k) {
    case Collective::all_reduce: return 2.0 * (n - 1) / n;
    case Collective::reduce_scatter:
    case Collective::all_gather:
    case Collective::all_to_all: return (n - 1) / n;
    default: return 1.0;  // broadcast, reduce
  }
}

Bandwidth bandwidth(const Coll& c, size_t bytes, double seconds, int nranks) {
  Bandwidth b;
  if (seconds <= 0) return b;
  b.algbw = static_cast<double>(bytes) / 1.0e9 / seconds;
  b.busbw = b.algbw * busbw_factor(c, nranks);
  return b;
}

}  // namespace perf
