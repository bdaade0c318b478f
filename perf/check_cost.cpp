// STRATA_CHECK's cost per call, measured side by side: two communicators over the same
// ranks, one made with STRATA_CHECK=0 and one with STRATA_CHECK=1, time blocks of blocking
// all_reduce calls in alternation; rank 0 prints each one's median time per call.
//   strata-run -n N -- strata-check-cost [BYTES...]      (default: 8 1048576)
#include <strata/strata.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

using namespace strata;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seconds per call of `calls` float all_reduces of `bytes` on `comm`.
double time_block(Comm& comm, std::vector<float>& x, std::vector<float>& y, int calls) {
  comm.barrier();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) comm.all_reduce(x.data(), y.data(), x.size(), DataType::float32, ReduceOp::sum);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / calls;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::strtoull(argv[i], nullptr, 10));
  if (sizes.empty()) sizes = {8, size_t{1} << 20};
  setenv("STRATA_CHECK", "0", 1);
  Comm plain = Comm::init_from_env();
  const int rank = plain.rank(), n = plain.size();
  UniqueId id;
  if (rank == 0) id = get_unique_id();
  plain.broadcast(id.bytes.data(), id.bytes.data(), id.bytes.size(), DataType::uint8, 0);
  setenv("STRATA_CHECK", "1", 1);
  Comm checked = Comm::init_rank(n, id, rank);
  if (rank == 0) std::printf("%d ranks; median time per all_reduce call over 21 alternating blocks\n", n);
  for (size_t bytes : sizes) {
    std::vector<float> x(std::max<size_t>(1, bytes / sizeof(float)), 1.0f), y(x.size());
    const int calls = bytes <= 65536 ? 500 : 20;
    time_block(plain, x, y, calls);  // warm-up: plans, pages
    time_block(checked, x, y, calls);
    std::vector<double> off, on;
    for (int b = 0; b < 21; ++b) {  // each goes first in every other block
      if (b % 2) on.push_back(time_block(checked, x, y, calls));
      off.push_back(time_block(plain, x, y, calls));
      if (b % 2 == 0) on.push_back(time_block(checked, x, y, calls));
    }
    if (rank == 0)
      std::printf("%10zu B: STRATA_CHECK=0 %9.2f us, =1 %9.2f us: +%.2f us per call (x%.2f)\n", x.size() * sizeof(float),
                  median(off) * 1e6, median(on) * 1e6, (median(on) - median(off)) * 1e6, median(on) / median(off));
  }
  checked.destroy();
  plain.destroy();
  return 0;
}
