// strata-train's checkpoint reader (training/checkpoint): the header of a checkpoint file
// read against the file's size, then the model check the trainer makes before loading.
// The first byte's bits make the harness write the right header and payload checksums
// first, so inputs also get past them to the sizes.
#include <cstring>

#include "checkpoint.hpp"
#include "errors.hpp"
#include "tests/fuzz/fuzz.hpp"
#include "trainer.hpp"

using namespace strata;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in{data, size};
  const uint8_t options = in.byte();
  std::string file = in.rest();
  const size_t head = sizeof(train::CheckpointHeader);
  if (file.size() >= head) {
    train::CheckpointHeader h;
    std::memcpy(&h, file.data(), head);
    if (options & 2) h.payload_checksum = train::fnv1a(file.data() + head, file.size() - head);
    if (options & 1) h.header_checksum = train::fnv1a(&h, offsetof(train::CheckpointHeader, header_checksum));
    std::memcpy(file.data(), &h, head);
  }
  try {
    train::CheckpointHeader h = train::parse_checkpoint_header(file.data(), file.size(), file.size(), "fuzz input");
    // An accepted header describes this file: three float vectors of num_params, exactly.
    const unsigned __int128 payload = static_cast<unsigned __int128>(h.num_params) * 3 * sizeof(float);
    FUZZ_CHECK(payload == file.size() - head && h.payload_bytes == file.size() - head);
    // The trainer's own options: a model of the checkpoint's shape, or one with another layer count.
    train::Options o;
    o.model.vocab = static_cast<int>(h.vocab);
    o.model.ctx = static_cast<int>(h.ctx);
    o.model.layers = static_cast<int>(h.layers ^ (options & 4 ? 1u : 0u));
    o.model.heads = static_cast<int>(h.heads);
    o.model.dim = static_cast<int>(h.dim);
    o.steps = 100;
    train::check_checkpoint_matches(h, o);
  } catch (const train::TrainError&) {
  }
  return 0;
}
