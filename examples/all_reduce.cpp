// A program built against an installed Strata: every rank contributes rank + 1, and the
// all_reduce's sum must be n(n + 1)/2 on every element. Run it with strata-run -n N.
#include <strata/strata.hpp>

#include <cstdio>
#include <vector>

int main() {
  strata::Comm comm = strata::Comm::init_from_env();
  const int n = comm.size(), rank = comm.rank();
  std::vector<float> v(1000, static_cast<float>(rank + 1));
  comm.all_reduce(v.data(), v.data(), v.size(), strata::DataType::float32, strata::ReduceOp::sum);
  const float want = n * (n + 1) / 2.0f;
  size_t wrong = 0;
  for (float x : v) wrong += x != want;
  std::printf("example all_reduce rank %d of %d: %s (%zu wrong of %zu)\n", rank, n, wrong ? "FAILED" : "passed", wrong,
              v.size());
  comm.destroy();
  return wrong ? 1 : 0;
}
