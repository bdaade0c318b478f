// Sharing allocations between processes: file descriptors over an AF_UNIX socket
// (ground/fd_passing), and a device allocation plus a pinned flag page exported to a
// second process (this binary in the --ipc-peer role), which imports them, waits on the
// flag from its stream, reads and writes the parent's memory through its mapping, and
// keeps using it after the parent has freed it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "device_test.hpp"
#include "ground/device/ipc_handle.hpp"
#include "ground/fd_passing.hpp"
#include "process_roles.hpp"
#include "strata/error.hpp"

namespace strata_test {
namespace {

using strata::device::IpcHandle;

constexpr size_t kBytes = 3 << 20;  // not a multiple of CUDA's 2 MiB granularity

uint8_t pattern(char which, size_t i) { return static_cast<uint8_t>(which * 31 + i * 7 + (i >> 12)); }

std::vector<uint8_t> filled(char which) {
  std::vector<uint8_t> v(kBytes);
  for (size_t i = 0; i < kBytes; ++i) v[i] = pattern(which, i);
  return v;
}

// Host-side poll of a pinned flag with a deadline, so a dead peer fails the test instead
// of hanging a stream forever.
bool flag_reaches(const uint64_t* flag, uint64_t v, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) < v)
    if (std::chrono::steady_clock::now() > end) return false;
    else std::this_thread::sleep_for(std::chrono::microseconds(100));
  return true;
}

TEST(FdPassing, DescriptorsTravelWithTheirBytes) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  int pipe_fds[2];
  ASSERT_EQ(pipe2(pipe_fds, O_CLOEXEC), 0);
  const char msg[] = "two descriptors";
  strata::send_with_fds(sv[0], msg, sizeof msg, std::vector<int>{pipe_fds[0], pipe_fds[1]});
  char got[sizeof msg] = {};
  int fds[2] = {-1, -1};
  ASSERT_EQ(strata::recv_with_fds(sv[1], got, sizeof got, fds), 2u);
  EXPECT_STREQ(got, msg);
  // The received write end writes into the original pipe.
  ASSERT_EQ(write(fds[1], "x", 1), 1);
  char c = 0;
  ASSERT_EQ(read(pipe_fds[0], &c, 1), 1);
  EXPECT_EQ(c, 'x');
  EXPECT_EQ(fcntl(fds[0], F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  // More descriptors than the receiver takes: all closed, and an error.
  strata::send_with_fds(sv[0], msg, sizeof msg, std::vector<int>{pipe_fds[0], pipe_fds[1]});
  int one = -1;
  EXPECT_THROW(strata::recv_with_fds(sv[1], got, sizeof got, std::span<int>(&one, 1)), strata::SystemError);
  // A peer that closes first.
  close(sv[0]);
  try {
    strata::recv_with_fds(sv[1], got, sizeof got, fds);
    ADD_FAILURE() << "no error from a closed peer";
  } catch (const strata::SystemError& e) {
    EXPECT_NE(std::string(e.what()).find("closed"), std::string::npos) << e.what();
  }
  for (int fd : {sv[1], pipe_fds[0], pipe_fds[1], fds[0], fds[1]}) close(fd);
}

TEST(FdPassing, GarbageIsNotAHandle) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  std::vector<char> junk(200, 'j');
  ASSERT_EQ(write(sv[0], junk.data(), junk.size()), static_cast<ssize_t>(junk.size()));
  EXPECT_THROW(strata::device::recv_handle(sv[1]), strata::SystemError);
  close(sv[0]);
  close(sv[1]);
}

TEST(Ipc, ExportRefusesWhatIsNotAnAllocationOfOurs) {
  auto& mem = dev().memory();
  int on_stack = 0;
  EXPECT_THROW(mem.export_handle(&on_stack), strata::InvalidArgument);
  DeviceBuffer d(4096);
  EXPECT_THROW(mem.export_handle(d.bytes() + 64), strata::InvalidArgument);
  EXPECT_THROW(mem.unimport(d.get()), strata::InvalidArgument);
}

// The peer's side; the numbered steps match ExportImportBetweenProcesses's.
int ipc_peer(int sock) {
  auto fail = [](const char* what) {
    std::fprintf(stderr, "ipc peer: %s\n", what);
    return 1;
  };
  auto& mem = dev().memory();
  auto& ex = dev().execution();
  // 1. Import the device buffer and the flag page.
  IpcHandle hd = strata::device::recv_handle(sock), hf = strata::device::recv_handle(sock);
  void* d = mem.import_handle(hd);
  auto* flags = static_cast<uint64_t*>(mem.import_handle(hf));
  if (mem.query(d).kind != strata::MemoryKind::device || mem.query(d).origin != strata::device::Origin::imported)
    return fail("the imported buffer is not imported device memory");
  if (mem.query(flags).kind != strata::MemoryKind::host) return fail("the imported flags are not host memory");
  // 2. Our stream waits for the parent's flag 0, then reads: the parent's stream wrote B first.
  auto s = ex.stream_create();
  auto* host = static_cast<uint8_t*>(mem.host_alloc(kBytes));
  ex.wait_value(s, &flags[0], 1);
  ex.copy(host, d, kBytes, s);
  if (!flag_reaches(&flags[0], 1, 30)) return fail("the parent never set flag 0");
  ex.stream_synchronize(s);
  const std::vector<uint8_t> b = filled('B');
  if (std::memcmp(host, b.data(), kBytes) != 0) return fail("did not read what the parent wrote before flag 0");
  // 3. Write C through the mapping, then flag 1 from our stream.
  const std::vector<uint8_t> c = filled('C');
  std::memcpy(host, c.data(), kBytes);
  ex.copy(d, host, kBytes, s);
  ex.write_value(s, &flags[1], 1);
  ex.stream_synchronize(s);
  // 4. The parent frees its allocation and tells us; ours still works.
  char freed = 0;
  if (read(sock, &freed, 1) != 1 || freed != 'F') return fail("no word from the parent after its free");
  const std::vector<uint8_t> e = filled('E');
  std::memcpy(host, e.data(), kBytes);
  ex.copy(d, host, kBytes, s);
  ex.memset(host, 0, kBytes, s);
  ex.copy(host, d, kBytes, s);
  ex.stream_synchronize(s);
  if (std::memcmp(host, e.data(), kBytes) != 0) return fail("the mapping changed after the parent's free");
  mem.unimport(d);
  mem.unimport(flags);
  mem.host_free(host);
  ex.stream_destroy(s);
  std::printf("ipc peer: done\n");
  return 0;
}

}  // namespace

int ipc_peer_role(int argc, char** argv) {
  if (argc < 3) return 2;
  try {
    return ipc_peer(std::atoi(argv[2]));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ipc peer: %s\n", e.what());
    return 1;
  }
}

namespace {

TEST(Ipc, ExportImportBetweenProcesses) {
  auto& mem = dev().memory();
  auto& ex = dev().execution();
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  fcntl(sv[0], F_SETFD, FD_CLOEXEC);  // ours; sv[1] is the peer's
  void* d = mem.alloc(kBytes);
  auto* flags = static_cast<uint64_t*>(mem.host_alloc(4096));
  flags[0] = flags[1] = 0;
  upload(d, filled('A').data(), kBytes);
  Process peer = start_role("--ipc-peer", {std::to_string(sv[1])});
  close(sv[1]);
  // 1. Hand over both allocations.
  strata::device::send_handle(sv[0], mem.export_handle(d));
  strata::device::send_handle(sv[0], mem.export_handle(flags));
  // 2. Write B, then flag 0 from our stream.
  auto s = ex.stream_create();
  auto* host = static_cast<uint8_t*>(mem.host_alloc(kBytes));
  const std::vector<uint8_t> b = filled('B');
  std::memcpy(host, b.data(), kBytes);
  ex.copy(d, host, kBytes, s);
  ex.write_value(s, &flags[0], 1);
  // 3. The peer writes C into our buffer, then flag 1.
  ex.wait_value(s, &flags[1], 1);
  ex.copy(host, d, kBytes, s);
  const bool peer_wrote = flag_reaches(&flags[1], 1, 30);
  if (peer_wrote) ex.stream_synchronize(s);
  EXPECT_TRUE(peer_wrote) << "the peer never set flag 1";
  if (peer_wrote) {
    const std::vector<uint8_t> c = filled('C');
    EXPECT_EQ(std::memcmp(host, c.data(), kBytes), 0) << "the peer's writes are not in our buffer";
    // 4. Free while the peer still maps it.
    mem.free(d);
    EXPECT_EQ(write(sv[0], "F", 1), 1);
    ex.stream_destroy(s);
  }
  ProcResult r = peer.finish(60);
  EXPECT_TRUE(r.exited && r.exit_code == 0) << r.describe() << "\n" << r.out;
  close(sv[0]);
  mem.host_free(flags);
  mem.host_free(host);
}

}  // namespace
}  // namespace strata_test
