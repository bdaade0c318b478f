#include "data.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "errors.hpp"

namespace strata::train {

TextData TextData::load(const std::string& path, int ctx) {
  std::vector<uint8_t> bytes;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw TrainError("cannot read data file '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw TrainError("data file '" + path + "' is not a regular file");
  }
  bytes.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < bytes.size()) {
    ssize_t r = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      int e = errno;
      ::close(fd);
      throw TrainError("error reading data file '" + path +
                       "': " + (r < 0 ? std::strerror(e) : "file shrank while reading"));
    }
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  return from_bytes(path, std::move(bytes), ctx);
}

TextData TextData::from_bytes(const std::string& path, std::vector<uint8_t> bytes, int ctx) {
  TextData d;
  d.path_ = path;
  d.bytes_ = std::move(bytes);
  if (d.bytes_.empty()) throw TrainError("data file '" + path + "' is empty");
  size_t val = d.bytes_.size() / 10;
  d.split_ = d.bytes_.size() - val;
  size_t need = static_cast<size_t>(ctx) + 1;
  if (d.val_size() < need || d.train_size() < need) {
    throw TrainError("data file '" + path + "' has " + std::to_string(d.size()) +
                     " bytes: with --ctx " + std::to_string(ctx) + " each split needs at least " +
                     std::to_string(need) +
                     " bytes (training split: " + std::to_string(d.train_size()) +
                     ", validation split, the last 10%: " + std::to_string(d.val_size()) +
                     "); use a smaller --ctx or a larger file");
  }
  return d;
}

BatchSampler::BatchSampler(uint64_t seed) : rng_(stream_seed(seed, 0xda7a)) {}

void BatchSampler::restore(const uint64_t state[4], uint64_t drawn) {
  rng_.set_state(state);
  drawn_ = drawn;
}

namespace {

void copy_window(const uint8_t* src, size_t start, int T, int* inputs, int* targets) {
  for (int t = 0; t < T; ++t) {
    inputs[t] = src[start + t];
    targets[t] = src[start + t + 1];
  }
}

}  // namespace

void BatchSampler::next(const TextData& d, int batch, int T, const std::vector<int>& slices, int dp, int* inputs,
                        int* targets) {
  const int local = batch / dp;
  const uint64_t starts = d.train_size() - T;  // a window needs T+1 bytes
  // Every rank draws the whole global batch so the streams stay in step.
  for (int i = 0; i < batch; ++i) {
    uint64_t start = rng_.below(starts);
    for (size_t k = 0; k < slices.size(); ++k) {
      const int j = i - slices[k] * local;
      const size_t row = k * local + j;
      if (j >= 0 && j < local) copy_window(d.train(), start, T, inputs + row * T, targets + row * T);
    }
  }
  ++drawn_;
}

void val_batch(const TextData& d, int index, int batch, int T, const std::vector<int>& slices, int dp, int* inputs,
               int* targets) {
  const int local = batch / dp;
  const uint64_t starts = d.val_size() - T;
  for (size_t k = 0; k < slices.size(); ++k)
    for (int j = 0; j < local; ++j) {
      const uint64_t window = static_cast<uint64_t>(index) * batch + slices[k] * local + j;
      const size_t row = k * local + j;
      copy_window(d.val(), (window * T) % starts, T, inputs + row * T, targets + row * T);
    }
}

}  // namespace strata::train
