// device-reduce-bw: the device backend's reduce task beside its device-to-device copy, in
// one run (docs/gpu.md). Each is queued `iters` times back to back on one stream and timed
// from the host to the end of a synchronisation of that stream; bytes read and written
// count alike: a copy of B bytes moves 2B, a two-source reduce of B-byte vectors 3B.
//
//   STRATA_DEVICE=cuda device-reduce-bw [--bytes 256M] [--iters 20] [--types float,bfloat16,f8e4m3]
//
// Prints one line per type: the copy's and the reduce's GB/s and their ratio (the goal on
// a GPU: reduce >= 90% of copy).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "ground/device/backend.hpp"
#include "strata/error.hpp"
#include "strata/types.hpp"

using namespace strata;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  size_t bytes = size_t(256) << 20;
  int iters = 20;
  std::vector<DataType> types{DataType::float32, DataType::bfloat16, DataType::float8_e4m3};
};

size_t parse_bytes(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  const std::string unit = end ? end : "";
  const double scale = unit == "K" ? 1024.0 : unit == "M" ? 1048576.0 : unit == "G" ? 1073741824.0 : 1.0;
  if (!(v > 0) || (!unit.empty() && scale == 1.0)) throw InvalidArgument("--bytes " + s + ": expected e.g. 256M");
  return static_cast<size_t>(v * scale);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const std::string next = i + 1 < argc ? argv[i + 1] : "";
    if (a == "--bytes" && !next.empty()) o.bytes = parse_bytes(argv[++i]);
    else if (a == "--iters" && !next.empty()) o.iters = std::max(1, std::atoi(argv[++i]));
    else if (a == "--types" && !next.empty()) {
      o.types.clear();
      std::stringstream ss(argv[++i]);
      for (std::string t; std::getline(ss, t, ',');) {
        auto d = parse_datatype(t);
        if (!d) throw InvalidArgument("--types: unknown type " + t);
        o.types.push_back(*d);
      }
    } else {
      throw InvalidArgument("unknown option " + a + " (--bytes N, --iters N, --types a,b)");
    }
  }
  return o;
}

// Seconds per task for `iters` tasks queued by `queue` back to back on `s`.
template <class Queue>
double seconds_each(device::Execution& x, device::Stream s, int iters, const Queue& queue) {
  queue();  // warm: first touch, kernel load
  x.stream_synchronize(s);
  const auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) queue();
  x.stream_synchronize(s);
  return std::chrono::duration<double>(Clock::now() - t0).count() / iters;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    device::Backend& b = device::require_backend("device-reduce-bw");
    device::Execution& x = b.execution();
    device::Memory& m = b.memory();
    device::Stream s = x.stream_create();
    void* a = m.alloc(o.bytes);
    void* c = m.alloc(o.bytes);
    void* d = m.alloc(o.bytes);
    x.memset(a, 0x11, o.bytes, s);  // small finite values in every type
    x.memset(c, 0x22, o.bytes, s);
    printf("# device-reduce-bw: backend %s, device %s, %zu bytes per vector, %d iterations\n", b.name(),
           b.device_name().c_str(), o.bytes, o.iters);
    printf("# %-10s %12s %12s %8s   (GB/s: bytes read + written per second)\n", "type", "copy", "reduce", "ratio");
    for (DataType t : o.types) {
      const size_t count = o.bytes / size_of(t), bytes = count * size_of(t);
      const double copy_s = seconds_each(x, s, o.iters, [&] { x.copy(d, a, bytes, s); });
      const void* srcs[2] = {a, c};
      const double reduce_s =
          seconds_each(x, s, o.iters, [&] { x.reduce(d, srcs, 2, count, t, ReduceOp::sum, s); });
      const double copy_gbs = 2.0 * bytes / copy_s / 1e9, reduce_gbs = 3.0 * bytes / reduce_s / 1e9;
      printf("  %-10s %12.1f %12.1f %7.1f%%\n", name(t), copy_gbs, reduce_gbs, 100.0 * reduce_gbs / copy_gbs);
    }
    m.free(a);
    m.free(c);
    m.free(d);
    x.stream_destroy(s);
    return 0;
  } catch (const Error& e) {
    fprintf(stderr, "device-reduce-bw: %s\n", e.what());
    return 1;
  }
}
