// Writing a large receive's destination with non-temporal stores: the destination's cache
// lines are not read from memory before being overwritten, and the data does not evict the
// FIFO (which the peer keeps refilling) from the caches. Faster for all-reduces of >= 1 MiB
// transfers, and needed from 256 KiB (the default STRATA_SHM_STREAM_BYTES) by the two-rank
// forwarding all-reduce's 512 KiB halves (docs/benchmarks.md, "Measured choices"); small
// transfers keep ordinary stores because their data is usually read again soon. The same
// copy also writes FIFOs when the plan's StoreChooser says so.
#pragma once

#include <emmintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "transports/transport.hpp"

namespace strata {

inline void copy_streaming(char* dst, const char* src, size_t n) {
  size_t head = std::min(n, static_cast<size_t>((16 - reinterpret_cast<uintptr_t>(dst) % 16) % 16));
  std::memcpy(dst, src, head);
  dst += head, src += head, n -= head;
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
  }
  std::memcpy(dst + i, src + i, n - i);
  _mm_sfence();  // the stores are visible before the transfer is reported complete
}

// A reduction whose local operand is not the destination: reduce a cache-sized piece at a
// time into `tmp`, then stream it out. (In place, the destination's lines are read anyway.)
inline void reduce_streaming(const Reduction& r, char* dst, size_t off, const char* incoming, size_t bytes,
                             std::vector<char>& tmp) {
  for (size_t k = 0; k < bytes; k += tmp.size()) {
    size_t m = std::min(tmp.size(), bytes - k);
    r.fn(tmp.data(), r.local + off + k, incoming + k, m / r.elem_size);
    copy_streaming(dst + off + k, tmp.data(), m);
  }
}

}  // namespace strata
