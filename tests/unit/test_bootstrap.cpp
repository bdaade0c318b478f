// The bootstrap refuses connections that do not present the job's secret, both at the
// root and at a rank's listener, and keeps serving the real job.
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

#include "core/bootstrap/unique_id.hpp"
#include "ground/socket.hpp"
#include "strata/strata.hpp"

namespace strata {
namespace {

// Connects, says hello with `secret`, and reports whether the other side hung up.
bool refused(const net::SockAddr& to, const uint8_t secret[16], uint64_t tag) {
  net::Fd fd = net::connect_to(to, net::deadline_after(5));
  net::Hello h = net::make_hello(secret, tag, 0, 1, net::Role::join, 0);
  net::send_all(fd.get(), &h, sizeof h, net::deadline_after(5), "listener");
  pollfd p{fd.get(), POLLIN, 0};
  if (::poll(&p, 1, 5000) != 1) return false;  // still open after 5 s: accepted and waiting
  char c;
  return ::recv(fd.get(), &c, 1, 0) == 0;
}

TEST(Bootstrap, RootRefusesAWrongSecretAndStillServesTheJob) {
  setenv("STRATA_SOCKET_IFNAME", "lo", 1);
  UniqueId id = get_unique_id();
  bootstrap::IdFields f = bootstrap::decode_id(id);
  bootstrap::Secret wrong = f.secret;
  wrong.bytes[3] ^= 0x40;
  EXPECT_TRUE(refused(f.root, wrong.bytes, 0));

  int results[2] = {0, 0};
  std::thread t1([&] {
    Comm c = Comm::init_rank(2, id, 1);
    int x = 5;
    c.all_reduce(&x, &results[1], 1, DataType::int32, ReduceOp::sum);
    c.destroy();
  });
  Comm c = Comm::init_rank(2, id, 0);
  int x = 7;
  c.all_reduce(&x, &results[0], 1, DataType::int32, ReduceOp::sum);
  c.destroy();
  t1.join();
  EXPECT_EQ(results[0], 12);
  EXPECT_EQ(results[1], 12);
}

TEST(Bootstrap, ListenerAcceptsOnlyTheRightSecretAndCommunicator) {
  net::SockAddr lo = net::parse_host_port("127.0.0.1:0");
  net::Fd listener = net::listen_on(lo);
  net::SockAddr at = net::local_address(listener.get());
  bootstrap::Secret good = bootstrap::random_secret(), bad = good;
  bad.bytes[15] ^= 1;
  const uint64_t tag = 42;
  std::thread server([&] {
    auto [fd, hello] = net::accept_authenticated(listener.get(), good.bytes, tag, net::deadline_after(20));
    EXPECT_EQ(hello.rank, 0);
    EXPECT_EQ(hello.comm_tag, tag);
    char ok = 'y';
    net::send_all(fd.get(), &ok, 1, net::deadline_after(5), "client");
  });
  EXPECT_TRUE(refused(at, bad.bytes, tag));       // wrong secret
  EXPECT_TRUE(refused(at, good.bytes, tag + 1));  // another communicator's connection
  net::Fd fd = net::connect_to(at, net::deadline_after(5));
  net::Hello h = net::make_hello(good.bytes, tag, 0, 1, net::Role::control, 0);
  net::send_all(fd.get(), &h, sizeof h, net::deadline_after(5), "listener");
  char got = 0;
  net::recv_all(fd.get(), &got, 1, net::deadline_after(10), "listener");
  EXPECT_EQ(got, 'y');
  server.join();
}

TEST(Bootstrap, GarbageUniqueIdIsRejected) {
  UniqueId id;
  id.bytes.fill(0xab);
  EXPECT_THROW(Comm::init_rank(1, id, 0), InvalidArgument);
}

TEST(Bootstrap, SecretFromEnvironmentMustBeHex) {
  EXPECT_THROW(bootstrap::parse_secret_hex("xyz"), InvalidArgument);
  EXPECT_THROW(bootstrap::parse_secret_hex(std::string(32, 'g')), InvalidArgument);
  auto s = bootstrap::parse_secret_hex("000102030405060708090a0b0c0d0e0f");
  for (int i = 0; i < 16; ++i) EXPECT_EQ(s.bytes[i], i);
}

}  // namespace
}  // namespace strata
