// The device links when a peer fails or misbehaves: a killed peer is a PeerError naming
// it (and the device stays usable), a peer that dies right after publishing a transfer
// still delivers it (its memory stays mapped), a stopped peer holds nothing up (progress
// keeps returning; the engine's liveness probe names such a peer), and bad input is a
// clear error that loses nothing.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "device_test.hpp"
#include "link_ranks.hpp"
#include "strata/error.hpp"

namespace strata_test {
namespace {

constexpr size_t kBytes = 1 << 20;

std::unique_ptr<DeviceBuffer> filled(int from, int to) {
  auto b = std::make_unique<DeviceBuffer>(kBytes);
  std::vector<uint8_t> host(kBytes);
  for (size_t i = 0; i < kBytes; ++i) host[i] = pattern(from, to, 0, i);
  upload(b->get(), host.data(), kBytes);
  return b;
}

void check_filled(const DeviceBuffer& b, int from, int to) {
  const std::vector<uint8_t> got = download<uint8_t>(b.get(), kBytes);
  for (size_t i = 0; i < kBytes; ++i)
    if (got[i] != pattern(from, to, 0, i)) fail("from rank " + std::to_string(from) + ": byte " + std::to_string(i));
}

// A device copy on a new stream after a failure: the device is still usable.
void device_still_works() {
  auto& ex = dev().execution();
  DeviceBuffer a(4096), b(4096);
  std::vector<uint8_t> host(4096);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint8_t>(i * 5);
  upload(a.get(), host.data(), host.size());
  auto s = ex.stream_create();
  ex.copy(b.get(), a.get(), host.size(), s);
  ex.stream_synchronize(s);
  ex.stream_destroy(s);
  if (download<uint8_t>(b.get(), host.size()) != host) fail("the device copy after the failure is wrong");
}

// Rank 1 is killed at once; rank 0 sends to it (`sending`) or receives from it.
void killed_peer(LinkRank& me, bool sending) {
  if (me.rank == 1) raise(SIGKILL);
  auto out = filled(0, 1);
  DeviceBuffer in(kBytes);
  if (sending) me.device(1).post_send(out->get(), kBytes);
  else me.device(1).post_recv(in.get(), kBytes, {});
  const auto t0 = std::chrono::steady_clock::now();
  try {
    drive({&me.device(1)}, 30);
    fail("no error although rank 1 was killed");
  } catch (const strata::PeerError& e) {
    if (e.peer() != 1) fail(std::string("the error names rank ") + std::to_string(e.peer()) + ": " + e.what());
    std::printf("error after %.2f s: %s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), e.what());
  }
  device_still_works();
}

// Rank 1 publishes 1 MiB and dies; rank 0 still receives every byte.
void dies_after_publishing(LinkRank& me) {
  if (me.rank == 1) {
    auto out = filled(1, 0);
    me.device(0).post_send(out->get(), kBytes);
    while (!me.device(0).progress()) {
    }
    std::fflush(stdout);
    raise(SIGKILL);
  }
  DeviceBuffer in(kBytes);
  me.device(1).post_recv(in.get(), kBytes, {});
  drive({&me.device(1)}, 30);
  check_filled(in, 1, 0);
}

// Rank 1 stops itself before sending; rank 0's progress keeps returning promptly, without
// an error, until the test lets rank 1 go on; then the transfer completes.
void stopped_peer(LinkRank& me) {
  if (me.rank == 1) {
    std::printf("stopping\n");
    std::fflush(stdout);
    raise(SIGSTOP);
    auto out = filled(1, 0);
    me.device(0).post_send(out->get(), kBytes);
    drive({&me.device(0)}, 60);
    return;
  }
  DeviceBuffer in(kBytes);
  me.device(1).post_recv(in.get(), kBytes, {});
  double longest = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1)) {
    const auto c0 = std::chrono::steady_clock::now();
    me.device(1).progress();
    longest = std::max(longest, std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count());
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  if (me.device(1).idle()) fail("the receive completed although its sender is stopped");
  if (longest > 0.25) fail("a progress call took " + std::to_string(longest) + " s while the peer was stopped");
  std::printf("waited; the longest progress call took %.1f ms\n", longest * 1e3);
  std::fflush(stdout);
  drive({&me.device(1)}, 60);
  check_filled(in, 1, 0);
}

// Sends that are not device memory of ours, or run past their allocation, are refused
// before anything is queued; a receive of another size than the send is a PeerError
// naming the sender (the sender then learns that its receiver is gone).
void bad_input(LinkRank& me) {
  strata::Link& l = me.device(1 - me.rank);
  if (me.rank == 0) {
    auto expect_refused = [&](const void* p, size_t n, const std::string& says) {
      try {
        l.post_send(p, n);
        fail("no error for a send of " + std::to_string(n) + " bytes that " + says);
      } catch (const strata::InvalidArgument& e) {
        if (std::string(e.what()).find(says) == std::string::npos) fail(std::string("the error does not say \"") + says + "\": " + e.what());
        std::printf("refused: %s\n", e.what());
      }
    };
    std::vector<char> host(100);
    expect_refused(host.data(), host.size(), "is not memory of this process's device backend (host memory)");
    DeviceBuffer small(4096);
    // The allocation's own length: CUDA rounds 4096 up to its granularity (2 MiB).
    const size_t length = dev().memory().query(small.get()).length;
    expect_refused(small.bytes() + length - 96, 200, "run past the end of its allocation");
    if (!l.idle()) fail("a refused send left something queued");
    l.post_send(small.get(), 100);
    try {
      drive({&l}, 30);
      fail("the send completed although its receive was of another size");
    } catch (const strata::PeerError& e) {
      if (e.peer() != 1) fail(e.what());
    }
    return;
  }
  DeviceBuffer in(4096);
  l.post_recv(in.get(), 200, {});
  try {
    drive({&l}, 30);
    fail("no error for a receive of 200 bytes matched with a send of 100");
  } catch (const strata::PeerError& e) {
    if (e.peer() != 0 || std::string(e.what()).find("mismatched send/receive sizes") == std::string::npos) fail(e.what());
    std::printf("mismatch: %s\n", e.what());
  }
}

const bool kRegistered = [] {
  add_scenario("killed_sender", [](LinkRank& me) { killed_peer(me, false); });
  add_scenario("killed_receiver", [](LinkRank& me) { killed_peer(me, true); });
  add_scenario("dies_after_publishing", dies_after_publishing);
  add_scenario("stopped", stopped_peer);
  add_scenario("bad_input", bad_input);
  return true;
}();

bool is_stopped(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] == 'T';
}

struct Hosts {
  const char* name;
  std::vector<RankSpec> ranks;
};
const Hosts kIpc{"ipc", {{"hostA"}, {"hostA"}}};
const Hosts kStaging{"staging", {{"hostA"}, {"hostB"}}};

// Over staging only a killed sender: a send into the host link's socket may complete
// before the peer's death is known, which is tcp's contract too.
TEST(DeviceLinks, KilledPeerIsAnErrorNamingIt) {
  const std::pair<const Hosts*, const char*> cases[] = {
      {&kIpc, "killed_sender"}, {&kIpc, "killed_receiver"}, {&kStaging, "killed_sender"}};
  for (const auto& [hosts, which] : cases) {
    SCOPED_TRACE(std::string(hosts->name) + " " + which);
    const auto res = run_job(which, hosts->ranks);
    ASSERT_EQ(res.size(), 2u);
    EXPECT_EQ(res[1].term_signal, SIGKILL) << res[1].describe();
    EXPECT_TRUE(res[0].exited && res[0].exit_code == 0) << res[0].describe() << "\n" << tail(res[0].out);
    EXPECT_NE(res[0].out.find("rank 1 is unreachable"), std::string::npos) << tail(res[0].out);
  }
}

TEST(DeviceLinks, IpcPeerThatDiesAfterPublishingStillDelivers) {
  const auto res = run_job("dies_after_publishing", kIpc.ranks);
  ASSERT_EQ(res.size(), 2u);
  EXPECT_EQ(res[1].term_signal, SIGKILL) << res[1].describe();
  EXPECT_TRUE(res[0].exited && res[0].exit_code == 0) << res[0].describe() << "\n" << tail(res[0].out);
}

TEST(DeviceLinks, StoppedPeerHoldsNothingUp) {
  for (const Hosts& h : {kIpc, kStaging}) {
    SCOPED_TRACE(h.name);
    bool continued = false;
    const auto res = run_job("stopped", h.ranks, {}, [&](std::vector<Process>& p) {
      if (!p[1].wait_for_output("stopping", 30) || !p[0].wait_for_output("waited", 30)) return;
      for (int i = 0; i < 1000 && !is_stopped(p[1].pid()); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continued = kill(p[1].pid(), SIGCONT) == 0;
    });
    EXPECT_TRUE(continued);
    for (size_t r = 0; r < res.size(); ++r)
      EXPECT_TRUE(res[r].exited && res[r].exit_code == 0) << "rank " << r << ": " << res[r].describe() << "\n" << tail(res[r].out);
  }
}

TEST(DeviceLinks, IpcBadInputIsAClearError) {
  const auto res = run_job("bad_input", kIpc.ranks);
  for (size_t r = 0; r < res.size(); ++r)
    EXPECT_TRUE(res[r].exited && res[r].exit_code == 0) << "rank " << r << ": " << res[r].describe() << "\n" << tail(res[r].out);
}

}  // namespace
}  // namespace strata_test
