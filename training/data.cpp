#include "data.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "errors.hpp"

namespace strata::train {

namespace {

std::vector<uint8_t> read_file(const std::string& path) {
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
  if (bytes.empty()) throw TrainError("data file '" + path + "' is empty");
  return bytes;
}

std::vector<std::string> split_list(const std::string& list) {
  std::vector<std::string> out;
  size_t from = 0;
  for (;;) {
    const size_t comma = list.find(',', from);
    out.push_back(list.substr(from, comma - from));
    if (comma == std::string::npos) return out;
    from = comma + 1;
  }
}

bool is_shard(const std::string& path) { return path.size() > 4 && path.ends_with(".bin"); }

// Every file's tokens back to back; each checked against the vocabulary.
std::vector<uint16_t> read_all(const std::vector<std::string>& paths, int vocab) {
  std::vector<uint16_t> all;
  for (const std::string& p : paths) {
    if (p.empty()) throw TrainError("an empty name in the list of data files");
    const std::vector<uint16_t> t = TokenData::tokens_of(p, read_file(p));
    for (size_t i = 0; i < t.size(); ++i)
      if (t[i] >= vocab)
        throw TrainError("token " + std::to_string(t[i]) + " at index " + std::to_string(i) + " of '" + p +
                         "' is not below --vocab " + std::to_string(vocab));
    all.insert(all.end(), t.begin(), t.end());
  }
  return all;
}

}  // namespace

std::vector<uint16_t> TokenData::tokens_of(const std::string& path, const std::vector<uint8_t>& bytes) {
  if (!is_shard(path)) return std::vector<uint16_t>(bytes.begin(), bytes.end());
  const size_t header = kShardHeaderInts * sizeof(int32_t);
  const std::string what = "token shard '" + path + "'";
  if (bytes.size() < header)
    throw TrainError(what + " is " + std::to_string(bytes.size()) + " bytes, shorter than its " +
                     std::to_string(header) + "-byte header (llm.c's layout: 256 int32, then uint16 tokens)");
  int32_t h[3];
  std::memcpy(h, bytes.data(), sizeof h);
  if (h[0] != kShardMagic)
    throw TrainError(what + " has magic " + std::to_string(h[0]) + ", not llm.c's " + std::to_string(kShardMagic));
  if (h[1] != kShardVersion)
    throw TrainError(what + " is version " + std::to_string(h[1]) + "; this reads version " +
                     std::to_string(kShardVersion) + " (uint16 tokens)");
  const size_t body = bytes.size() - header;
  if (h[2] < 0 || body != static_cast<size_t>(h[2]) * sizeof(uint16_t))
    throw TrainError(what + ": its header says " + std::to_string(h[2]) + " tokens, but the file has " +
                     std::to_string(body) + " bytes after the header (" + std::to_string(body / 2) +
                     (body % 2 ? " tokens and a half)" : " tokens)"));
  std::vector<uint16_t> t(static_cast<size_t>(h[2]));
  std::memcpy(t.data(), bytes.data() + header, body);  // little-endian, as llm.c writes them
  return t;
}

TokenData TokenData::load(const std::string& files, const std::string& val_files, int ctx, int vocab) {
  const std::vector<std::string> train = split_list(files);
  bool shards = false;
  for (const std::string& p : train) shards |= is_shard(p);
  std::vector<uint16_t> tokens = read_all(train, vocab);
  if (val_files.empty()) {
    const size_t train_size = tokens.size() - tokens.size() / 10;
    return split(files, std::move(tokens), train_size, shards, ctx);
  }
  const std::vector<uint16_t> val = read_all(split_list(val_files), vocab);
  const size_t n = tokens.size();
  tokens.insert(tokens.end(), val.begin(), val.end());
  return split(files + " (validation " + val_files + ")", std::move(tokens), n, shards, ctx);
}

TokenData TokenData::from_bytes(const std::string& path, std::vector<uint8_t> bytes, int ctx) {
  if (bytes.empty()) throw TrainError("data file '" + path + "' is empty");
  const size_t train_size = bytes.size() - bytes.size() / 10;
  return split(path, std::vector<uint16_t>(bytes.begin(), bytes.end()), train_size, false, ctx);
}

TokenData TokenData::split(std::string path, std::vector<uint16_t> tokens, size_t split, bool shards, int ctx) {
  TokenData d;
  d.path_ = std::move(path);
  d.tokens_ = std::move(tokens);
  d.split_ = split;
  d.shards_ = shards;
  const size_t need = static_cast<size_t>(ctx) + 1;
  if (d.val_size() < need || d.train_size() < need) {
    const char* unit = shards ? "tokens" : "bytes";
    throw TrainError("data file '" + d.path_ + "' has " + std::to_string(d.size()) + " " + unit +
                     ": with --ctx " + std::to_string(ctx) + " each split needs at least " + std::to_string(need) +
                     " " + unit + " (training split: " + std::to_string(d.train_size()) +
                     ", validation split: " + std::to_string(d.val_size()) +
                     "); use a smaller --ctx or more data");
  }
  return d;
}

BatchSampler::BatchSampler(uint64_t seed) : rng_(stream_seed(seed, 0xda7a)) {}

void BatchSampler::restore(const uint64_t state[4], uint64_t drawn) {
  rng_.set_state(state);
  drawn_ = drawn;
}

namespace {

void copy_window(const uint16_t* src, size_t start, int T, int* inputs, int* targets) {
  for (int t = 0; t < T; ++t) {
    inputs[t] = src[start + t];
    targets[t] = src[start + t + 1];
  }
}

}  // namespace

void BatchSampler::next(const TokenData& d, int batch, int T, const std::vector<int>& slices, int dp, int* inputs,
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

void val_batch(const TokenData& d, int index, int batch, int T, const std::vector<int>& slices, int dp, int* inputs,
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
