// What the harnesses share. A harness calls one parser with the input; the errors that
// parser documents for bad input are caught, anything else (a crash, a sanitizer report,
// another exception, a failed FUZZ_CHECK) is a finding: libFuzzer saves the input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#define FUZZ_CHECK(cond)                                                                 \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

namespace strata::fuzz {

// Takes the input apart front to back: a byte of options, then the rest.
struct Input {
  const uint8_t* p;
  size_t n;
  uint8_t byte() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
  std::string rest() {
    std::string s(reinterpret_cast<const char*>(p), n);
    p += n, n = 0;
    return s;
  }
};

}  // namespace strata::fuzz
