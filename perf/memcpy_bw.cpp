// The machine's single-core memory-copy ceiling, measured the way the benchmarks move
// data: memcpy of SIZE bytes (default 64 MiB) between two buffers, median of N runs.
//   memcpy-bw [SIZE_BYTES] [N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  size_t bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (64u << 20);
  int runs = argc > 2 ? std::atoi(argv[2]) : 9;
  std::vector<char> a(bytes, 1), b(bytes, 2);
  std::vector<double> gbps;
  for (int i = 0; i < runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    gbps.push_back(bytes / s / 1e9);
    std::swap(a, b);
  }
  std::sort(gbps.begin(), gbps.end());
  std::printf("memcpy %zu bytes: median %.2f GB/s (min %.2f, max %.2f, %d runs)\n", bytes, gbps[gbps.size() / 2],
              gbps.front(), gbps.back(), runs);
  return 0;
}
