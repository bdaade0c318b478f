#include "checkpoint.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <vector>

#include "errors.hpp"

namespace strata::train {
namespace {

std::string errno_text() { return std::strerror(errno); }

void make_dirs(const std::string& dir) {
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    partial = dir.substr(0, pos);
    if (partial.empty()) continue;
    if (::mkdir(partial.c_str(), 0777) != 0 && errno != EEXIST)
      throw TrainError("cannot create checkpoint directory '" + partial + "': " + errno_text());
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw TrainError("checkpoint path '" + dir + "' is not a directory");
}

uint64_t header_checksum(const CheckpointHeader& h) {
  return fnv1a(&h, offsetof(CheckpointHeader, header_checksum));
}

}  // namespace

uint64_t fnv1a(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string checkpoint_path(const std::string& dir, const std::string& file) { return dir + "/" + file; }

CheckpointWriter::CheckpointWriter(const std::string& dir, const std::string& file)
    : dir_(dir),
      tmp_(checkpoint_path(dir, file) + ".tmp"),
      final_(checkpoint_path(dir, file)),
      checksum_(fnv1a(nullptr, 0)) {
  make_dirs(dir);
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw TrainError("cannot create '" + tmp_ + "': " + errno_text());
  // The header goes in last, once the checksums are known; reserve its place.
  CheckpointHeader blank{};
  write_at(&blank, sizeof blank, 0);
}

CheckpointWriter::~CheckpointWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

void CheckpointWriter::write_at(const void* p, size_t n, uint64_t offset) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::pwrite(fd_, c, n, static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw TrainError("writing '" + tmp_ + "': " + errno_text());
    c += w;
    n -= static_cast<size_t>(w);
    offset += static_cast<uint64_t>(w);
  }
}

void CheckpointWriter::append(const float* data, size_t n) {
  size_t bytes = n * sizeof(float);
  write_at(data, bytes, sizeof(CheckpointHeader) + written_);
  checksum_ = fnv1a(data, bytes, checksum_);
  written_ += bytes;
}

void CheckpointWriter::commit(CheckpointHeader h) {
  std::memcpy(h.magic, kCheckpointMagic, sizeof h.magic);
  h.version = kCheckpointVersion;
  h.header_bytes = sizeof(CheckpointHeader);
  h.payload_bytes = written_;
  h.payload_checksum = checksum_;
  h.header_checksum = header_checksum(h);
  write_at(&h, sizeof h, 0);
  if (::fsync(fd_) != 0) throw TrainError("fsync '" + tmp_ + "': " + errno_text());
  ::close(fd_);
  fd_ = -1;
  if (::rename(tmp_.c_str(), final_.c_str()) != 0)
    throw TrainError("renaming '" + tmp_ + "' to '" + final_ + "': " + errno_text());
  committed_ = true;
  // The rename itself is durable only once the directory is.
  int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

CheckpointHeader parse_checkpoint_header(const void* bytes, size_t n, uint64_t file_bytes, const std::string& path,
                                         int sections) {
  auto bad = [&](const std::string& why) {
    return TrainError("checkpoint '" + path + "' is not usable: " + why);
  };
  CheckpointHeader h;
  if (file_bytes < sizeof h || n < sizeof h)
    throw bad("file is " + std::to_string(file_bytes) + " bytes, shorter than the header");
  std::memcpy(&h, bytes, sizeof h);
  if (std::memcmp(h.magic, kCheckpointMagic, sizeof h.magic) != 0)
    throw bad("wrong magic (not a strata-train checkpoint)");
  if (h.version != kCheckpointVersion)
    throw bad("version " + std::to_string(h.version) + ", this build reads version " +
              std::to_string(kCheckpointVersion));
  if (h.header_bytes != sizeof h || h.header_checksum != header_checksum(h))
    throw bad("header checksum mismatch (the header is corrupt)");
  // A count whose size wraps around 2^64 could match the file (found by tests/fuzz).
  uint64_t payload = 0;
  if (__builtin_mul_overflow(h.num_params, static_cast<uint64_t>(sections) * sizeof(float), &payload))
    throw bad("the header's parameter count " + std::to_string(h.num_params) + " is impossible (the header is corrupt)");
  if (h.payload_bytes != payload || file_bytes - sizeof h != h.payload_bytes)
    throw bad("file is " + std::to_string(file_bytes) + " bytes, the header says " +
              std::to_string(sizeof h + h.payload_bytes) + " (truncated or extended)");
  return h;
}

CheckpointReader::CheckpointReader(const std::string& dir, const std::string& file, int sections)
    : path_(checkpoint_path(dir, file)) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw TrainError("cannot read checkpoint '" + path_ + "': " + errno_text());
  struct stat st {};
  ::fstat(fd_, &st);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  auto bad = [&](const std::string& why) {
    return TrainError("checkpoint '" + path_ + "' is not usable: " + why);
  };
  CheckpointHeader head{};
  ssize_t got = ::pread(fd_, &head, sizeof head, 0);
  if (got < 0) throw bad("cannot read the header");
  h_ = parse_checkpoint_header(&head, static_cast<size_t>(got), size, path_, sections);
  std::vector<char> buf(1 << 20);
  uint64_t sum = fnv1a(nullptr, 0), off = sizeof h_;
  while (off < size) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), size - off));
    ssize_t r = ::pread(fd_, buf.data(), n, static_cast<off_t>(off));
    if (r <= 0) throw bad("read error: " + (r < 0 ? errno_text() : std::string("unexpected end")));
    sum = fnv1a(buf.data(), static_cast<size_t>(r), sum);
    off += static_cast<uint64_t>(r);
  }
  if (sum != h_.payload_checksum) throw bad("payload checksum mismatch (the data is corrupt)");
}

CheckpointReader::~CheckpointReader() {
  if (fd_ >= 0) ::close(fd_);
}

void CheckpointReader::read(int section, size_t first, size_t n, float* out) const {
  uint64_t off = sizeof h_ + (static_cast<uint64_t>(section) * h_.num_params + first) * sizeof(float);
  size_t bytes = n * sizeof(float);
  char* c = reinterpret_cast<char*>(out);
  while (bytes > 0) {
    ssize_t r = ::pread(fd_, c, bytes, static_cast<off_t>(off));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) throw TrainError("reading checkpoint '" + path_ + "' failed");
    c += r;
    bytes -= static_cast<size_t>(r);
    off += static_cast<uint64_t>(r);
  }
}

}  // namespace strata::train
