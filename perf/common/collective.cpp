#include "collective.hpp"

#include <array>
#include <string>
#include <utility>

namespace perf {

const char* name(Coll c) {
  switch (c) {
    case Coll::all_reduce: return "all_reduce";
    case Coll::reduce_scatter: return "reduce_scatter";
    case Coll::all_gather: return "all_gather";
    case Coll::broadcast: return "broadcast";
    case Coll::reduce: return "reduce";
    case Coll::all_to_all: return "all_to_all";
    case Coll::sendrecv: return "sendrecv";
    case Coll::pipeline: return "pipeline";
  }
  return "?";
}

std::optional<Coll> parse_coll(std::string_view s) {
  constexpr std::string_view suffix = "_perf";
  if (s.size() > suffix.size() && s.substr(s.size() - suffix.size()) == suffix)
    s.remove_suffix(suffix.size());
  static const std::array<std::pair<std::string_view, Coll>, 10> names = {{
      {"all_reduce", Coll::all_reduce},
      {"reduce_scatter", Coll::reduce_scatter},
      {"all_gather", Coll::all_gather},
      {"broadcast", Coll::broadcast},
      {"reduce", Coll::reduce},
      {"all_to_all", Coll::all_to_all},
      {"alltoall", Coll::all_to_all},
      {"sendrecv", Coll::sendrecv},
      {"send_recv", Coll::sendrecv},
      {"pipeline", Coll::pipeline},
  }};
  for (const auto& [n, c] : names)
    if (n == s) return c;
  return std::nullopt;
}

bool has_op(Coll c) {
  return c == Coll::all_reduce || c == Coll::reduce_scatter || c == Coll::reduce;
}

bool has_root(Coll c) { return c == Coll::broadcast || c == Coll::reduce; }

bool checks_in_place(Coll c) {
  return c != Coll::all_to_all && c != Coll::sendrecv && c != Coll::pipeline;
}

Layout layout_for(Coll c, size_t count, int nranks) {
  const size_t n = nranks > 0 ? static_cast<size_t>(nranks) : 1;
  const size_t per_rank = count / n;
  Layout l;
  switch (c) {
    case Coll::all_reduce:
    case Coll::broadcast:
    case Coll::reduce:
    case Coll::sendrecv:
    case Coll::pipeline:
      l.send_count = l.recv_count = l.param_count = count;
      break;
    case Coll::reduce_scatter:
      l.send_count = per_rank * n;
      l.recv_count = per_rank;
      l.param_count = per_rank;
      l.recv_inplace_off = per_rank;
      break;
    case Coll::all_gather:
      l.send_count = per_rank;
      l.recv_count = per_rank * n;
      l.param_count = per_rank;
      l.send_inplace_off = per_rank;
      break;
    case Coll::all_to_all:
      l.send_count = l.recv_count = per_rank * n;
      l.param_count = per_rank;
      break;
  }
  return l;
}

double busbw_factor(Coll c, int nranks) {
  const double n = nranks > 0 ? nranks : 1;
  switch (c) {
    case Coll::all_reduce: return 2.0 * (n - 1) / n;
    case Coll::reduce_scatter:
    case Coll::all_gather:
    case Coll::all_to_all: return (n - 1) / n;
    case Coll::broadcast:
    case Coll::reduce:
    case Coll::sendrecv:
    case Coll::pipeline: return 1.0;
  }
  return 1.0;
}

Bandwidth bandwidth(Coll c, size_t bytes, double seconds, int nranks) {
  Bandwidth b;
  if (seconds <= 0) return b;
  b.algbw = static_cast<double>(bytes) / 1.0e9 / seconds;
  b.busbw = b.algbw * busbw_factor(c, nranks);
  return b;
}

}  // namespace perf
