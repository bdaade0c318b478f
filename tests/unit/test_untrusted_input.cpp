// Bytes from outside the process that the fuzzers (tests/fuzz) and sanitizers found
// mishandled, each checked against the rule its parser must keep: refused with an error
// that says what is wrong, and the good form still accepted.
#include <gtest/gtest.h>

#include <cstring>

#include "algorithms/hierarchy.hpp"
#include "core/bootstrap/bootstrap.hpp"
#include "core/bootstrap/id_exchange.hpp"
#include "ground/socket.hpp"
#include "strata/error.hpp"

namespace strata {
namespace {

template <class E, class F>
void expect_error_saying(F f, const std::string& says) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one saying '" << says << "'";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

// "node:4294967296" became a node size of 0 (a long cast to int) and every rank divided by
// it: SIGFPE under UBSan's eye in build_hierarchy.
TEST(UntrustedInput, HierarchySizesBeyondTheRankLimitAreRefused) {
  for (const char* spec : {"node:4294967296", "node:2147483648", "island:16777217", "node:99999999999999999999"})
    expect_error_saying<InvalidArgument>([&] { parse_hierarchy_spec(spec); }, "size in [1, 16777216]");
  auto spec = parse_hierarchy_spec("node:16777216");
  ASSERT_EQ(spec.size(), 1u);
  EXPECT_EQ(spec[0].size, 1 << 24);
}

// An overflowing figure was an infinite latency or bandwidth in the tuner's model.
TEST(UntrustedInput, InfiniteLinkModelsAreRefused) {
  const std::vector<std::string> hosts(2, "h");
  expect_error_saying<InvalidArgument>([&] { build_hierarchy(hosts, {}, "node:1e999us:1GB"); }, "'1e999us' is not a time");
  expect_error_saying<InvalidArgument>([&] { build_hierarchy(hosts, {}, "node:1us:1e308GB"); }, "'1e308GB' is not a rate");
  Hierarchy h = build_hierarchy(hosts, {}, "node:1.5us:6GB");
  EXPECT_DOUBLE_EQ(h.levels[0].link.latency_s, 1.5e-6);
  EXPECT_DOUBLE_EQ(h.levels[0].link.bandwidth_Bps, 6e9);
}

bootstrap::RankInfo good_info() {
  bootstrap::RankInfo info{};
  info.listen = net::parse_host_port("127.0.0.1:4000");
  std::snprintf(info.host, sizeof info.host, "hostA");
  std::snprintf(info.machine, sizeof info.machine, "boot");
  info.tcp_nsocks = 2;
  info.cpus[0] = 3;
  return info;
}

// A host identity without its NUL was read past its end (std::string(info.host)) by every
// rank building the hierarchy.
TEST(UntrustedInput, RankInfoFromAnotherProcessIsChecked) {
  EXPECT_NO_THROW(bootstrap::check_rank_info(good_info(), "rank 1"));
  auto bad = good_info();
  std::memset(bad.host, 'x', sizeof bad.host);
  expect_error_saying<SystemError>([&] { bootstrap::check_rank_info(bad, "rank 1"); }, "rank 1: host identity not terminated");
  bad = good_info();
  std::memset(bad.machine, 'x', sizeof bad.machine);
  expect_error_saying<SystemError>([&] { bootstrap::check_rank_info(bad, "rank 1"); }, "machine identity not terminated");
  bad = good_info();
  bad.listen.ss.ss_family = AF_UNIX;
  expect_error_saying<SystemError>([&] { bootstrap::check_rank_info(bad, "rank 1"); }, "not an IPv4 or IPv6 address");
  bad = good_info();
  bad.listen.len = 200;
  expect_error_saying<SystemError>([&] { bootstrap::check_rank_info(bad, "rank 1"); }, "not an IPv4 or IPv6 address");
  bad = good_info();
  bad.tcp_nsocks = 1 << 30;
  expect_error_saying<SystemError>([&] { bootstrap::check_rank_info(bad, "rank 1"); }, "STRATA_TCP_NSOCKS=1073741824");

  std::vector<bootstrap::RankInfo> table{good_info(), good_info()};
  std::memset(table[1].host, 'x', sizeof table[1].host);
  expect_error_saying<SystemError>(
      [&] { bootstrap::decode_rank_table(table.data(), 2 * sizeof table[0], 2, "the root"); }, "the root (rank 1)");
  expect_error_saying<SystemError>([&] { bootstrap::decode_rank_table(table.data(), sizeof table[0], 2, "the root"); },
                                   "bytes for 2 ranks");
  table[1] = good_info();
  EXPECT_EQ(bootstrap::decode_rank_table(table.data(), 2 * sizeof table[0], 2, "the root").size(), 2u);
}

// sscanf("%2x") took "+f", " f" and "-1" for hex digits in the root file and PMIx text.
TEST(UntrustedInput, PublishedIdIsExactlyHexDigits) {
  std::string hex(256, '0');
  UniqueId id = bootstrap::id_from_text("ok " + hex.substr(0, 254) + "Af", "f");
  EXPECT_EQ(id.bytes[127], 0xaf);
  for (const char* digits : {"+f", " f", "-1", "0x"})
    expect_error_saying<InvalidArgument>([&] { bootstrap::id_from_text("ok " + hex.substr(0, 254) + digits, "f"); },
                                         "f holds no unique id");
  expect_error_saying<PeerError>([&] { bootstrap::id_from_text("error bind failed", "f"); }, "bind failed");
}

}  // namespace
}  // namespace strata
