// The checkpoint file, DIR/checkpoint.bin: a fixed header, then the parameters and the two
// Adam moment vectors, each in canonical order (tensors back to back, no padding), so a
// checkpoint does not depend on the rank count, ZeRO mode or bucket size it was written
// with. Little-endian hosts only (the header is written as it lies in memory).
//
// Writing is atomic: everything goes to checkpoint.bin.tmp, which is fsynced and then
// renamed over checkpoint.bin (and the directory fsynced), so a crash at any point leaves
// either the old checkpoint or the new one. Two FNV-1a checksums (header, payload) catch a
// damaged or truncated file before anything is used.
#pragma once

#include <cstdint>
#include <string>

namespace strata::train {

struct CheckpointHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;
  uint32_t vocab, ctx, layers, heads, dim;
  uint32_t batch;  // global batch the data position refers to
  uint64_t seed;
  uint64_t step;  // optimizer steps completed
  uint64_t data_rng[4];
  uint64_t batches_drawn;
  uint64_t num_params;
  uint64_t payload_bytes;     // sections (3; DiLoCo's outer state: 2) * num_params * 4
  uint64_t payload_checksum;  // FNV-1a 64 over the payload
  uint64_t header_checksum;   // FNV-1a 64 over every header byte before this field
};
static_assert(sizeof(CheckpointHeader) == 128, "checkpoint header must have no padding");

inline constexpr char kCheckpointMagic[8] = {'S', 'T', 'R', 'A', 'T', 'G', 'P', 'T'};
inline constexpr uint32_t kCheckpointVersion = 1;
inline constexpr const char* kCheckpointFile = "checkpoint.bin";

enum class Section : int { params = 0, adam_m = 1, adam_v = 2 };
inline constexpr int kTrainerSections = 3;

// DiLoCo's outer state (training/diloco.hpp) is a file of the same kind with two sections.
enum class OuterSection : int { snapshot = 0, momentum = 1 };
inline constexpr int kOuterSections = 2;

std::string checkpoint_path(const std::string& dir, const std::string& file = kCheckpointFile);

// Streams a checkpoint into DIR/FILE.tmp; commit() makes it DIR/FILE.
// Destroying an uncommitted writer removes the temporary file.
class CheckpointWriter {
 public:
  // Creates DIR (and parents) if needed.
  explicit CheckpointWriter(const std::string& dir, const std::string& file = kCheckpointFile);
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  void append(const float* data, size_t n);  // sections in order (params, m, v), num_params each
  // Fills in sizes and checksums, writes the header, fsyncs, renames, fsyncs the directory.
  void commit(CheckpointHeader h);
  const std::string& path() const { return final_; }

 private:
  void write_at(const void* p, size_t n, uint64_t offset);
  std::string dir_, tmp_, final_;
  int fd_ = -1;
  uint64_t written_ = 0;
  uint64_t checksum_;
  bool committed_ = false;
};

// The header at the start of a checkpoint file of `file_bytes` bytes, from the first `n`
// bytes of it: magic, version, header checksum, and sizes that agree with each other and
// with the file. Throws TrainError naming `path` and what is wrong. (The payload checksum
// needs the whole file: CheckpointReader checks it.)
// `sections`: the arrays of num_params floats that follow (the trainer's parameters, Adam m
// and v; DiLoCo's outer state has its own count).
CheckpointHeader parse_checkpoint_header(const void* bytes, size_t n, uint64_t file_bytes, const std::string& path,
                                         int sections = kTrainerSections);

// Opens and fully verifies DIR/FILE (magic, version, sizes for `sections` sections, both
// checksums);
// throws TrainError naming what is wrong. Then reads any range of a section.
class CheckpointReader {
 public:
  explicit CheckpointReader(const std::string& dir, const std::string& file = kCheckpointFile,
                            int sections = kTrainerSections);
  ~CheckpointReader();
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  const CheckpointHeader& header() const { return h_; }
  const std::string& path() const { return path_; }
  // n floats of `s` starting at canonical index `first`.
  void read(Section s, size_t first, size_t n, float* out) const { read(static_cast<int>(s), first, n, out); }
  void read(OuterSection s, size_t first, size_t n, float* out) const { read(static_cast<int>(s), first, n, out); }

 private:
  void read(int section, size_t first, size_t n, float* out) const;
  std::string path_;
  int fd_ = -1;
  CheckpointHeader h_{};
};

uint64_t fnv1a(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ull);

}  // namespace strata::train
