// Random numbers that are the same on every platform and compiler: initialisation, data
// order and resumed runs must reproduce bit for bit, and std::normal_distribution (and
// friends) are implementation-defined.
#pragma once

#include <cmath>
#include <cstdint>

namespace strata::train {

inline uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Independent streams from one user seed (parameter init per tensor, data order, sampling),
// so that adding a stream never shifts another.
inline uint64_t stream_seed(uint64_t seed, uint64_t stream) {
  uint64_t x = seed ^ (stream * 0xd1b54a32d192ed03ull);
  return splitmix64(x);
}

// xoshiro256**: small state (four words) that a checkpoint stores as is.
class Rng {
 public:
  explicit Rng(uint64_t seed = 0) {
    for (auto& w : s_) w = splitmix64(seed);
  }
  uint64_t next() {
    uint64_t result = rotl(s_[1] * 5, 7) * 9;
    uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  // Uniform in [0, n) without modulo bias (Lemire's multiply-shift with rejection).
  uint64_t below(uint64_t n) {
    unsigned __int128 m = static_cast<unsigned __int128>(next()) * n;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < n) {
      uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(next()) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }
  // Box-Muller; the second value is dropped so the state stays just the four words.
  float normal() {
    double u1 = 1.0 - uniform();  // (0, 1]: log is finite
    double u2 = uniform();
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }

  const uint64_t* state() const { return s_; }
  void set_state(const uint64_t s[4]) {
    for (int i = 0; i < 4; ++i) s_[i] = s[i];
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace strata::train
