// strata-train's data loader (training/data): a text file's bytes are its tokens. The
// first byte chooses --ctx (1 to 64), the rest is the file. Every window handed out must
// be a run of the file's bytes. The same bytes read as a token shard must be refused or
// give exactly the tokens its header counts.
#include <algorithm>

#include "data.hpp"
#include "errors.hpp"
#include "tests/fuzz/fuzz.hpp"

using namespace strata;

namespace {
// The T+1 bytes of (inputs, targets) occur in `split` at some position.
bool from_split(const uint16_t* split, size_t n, const int* inputs, const int* targets, int T) {
  std::vector<uint16_t> window;
  for (int t = 0; t < T; ++t) window.push_back(static_cast<uint16_t>(inputs[t]));
  window.push_back(static_cast<uint16_t>(targets[T - 1]));
  for (int t = 0; t + 1 < T; ++t)
    if (targets[t] != inputs[t + 1]) return false;
  return std::search(split, split + n, window.begin(), window.end()) != split + n;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in{data, size};
  const int ctx = 1 + in.byte() % 64;
  std::string file = in.rest();
  try {
    train::TokenData d = train::TokenData::from_bytes("fuzz input", std::vector<uint8_t>(file.begin(), file.end()), ctx);
    FUZZ_CHECK(d.train_size() + d.val_size() == file.size() && d.val_size() > static_cast<size_t>(ctx) &&
               d.train_size() > static_cast<size_t>(ctx));
    const int batch = 4, dp = 2;
    std::vector<int> inputs(static_cast<size_t>(batch / dp * ctx)), targets(inputs.size());
    train::BatchSampler sampler(size);
    for (int rank = 0; rank < dp; ++rank) {
      sampler.next(d, batch, ctx, rank, dp, inputs.data(), targets.data());
      for (int j = 0; j < batch / dp; ++j)
        FUZZ_CHECK(from_split(d.train(), d.train_size(), &inputs[j * ctx], &targets[j * ctx], ctx));
      train::val_batch(d, 3, batch, ctx, {rank}, dp, inputs.data(), targets.data());
      for (int j = 0; j < batch / dp; ++j)
        FUZZ_CHECK(from_split(d.val(), d.val_size(), &inputs[j * ctx], &targets[j * ctx], ctx));
    }
  } catch (const train::TrainError&) {
  }
  try {
    const std::vector<uint16_t> t = train::TokenData::tokens_of("fuzz.bin", std::vector<uint8_t>(file.begin(), file.end()));
    FUZZ_CHECK(file.size() == train::kShardHeaderInts * 4 + t.size() * 2);
  } catch (const train::TrainError&) {
  }
  return 0;
}
