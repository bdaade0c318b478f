// UCX transport: reading UCX_TLS to tell whether UCX may use tcp (where Strata turns
// zero-copy sends off).
#include <gtest/gtest.h>

#include "transports/ucx/ucx_config.hpp"

using namespace strata::ucx;

TEST(UcxTcpUse, UnsetOrAllLeavesItToRdma) {
  EXPECT_EQ(tcp_use(nullptr), TcpUse::unless_rdma);
  EXPECT_EQ(tcp_use(""), TcpUse::unless_rdma);
  EXPECT_EQ(tcp_use("all"), TcpUse::unless_rdma);
  EXPECT_EQ(tcp_use("sm,all"), TcpUse::unless_rdma);
}

TEST(UcxTcpUse, ListNamingTcp) {
  EXPECT_EQ(tcp_use("tcp"), TcpUse::yes);
  EXPECT_EQ(tcp_use("tcp,self"), TcpUse::yes);
  EXPECT_EQ(tcp_use("sm,self,tcp"), TcpUse::yes);
  EXPECT_EQ(tcp_use("rc,tcp:aux"), TcpUse::yes);
}

TEST(UcxTcpUse, ListWithoutTcp) {
  EXPECT_EQ(tcp_use("sm,self"), TcpUse::no);
  EXPECT_EQ(tcp_use("rc,ud:aux,self"), TcpUse::no);
  // Names that merely contain the letters are other transports.
  EXPECT_EQ(tcp_use("tcpx,rdmacm"), TcpUse::no);
}

TEST(UcxTcpUse, ExclusionList) {
  EXPECT_EQ(tcp_use("^tcp"), TcpUse::no);
  EXPECT_EQ(tcp_use("^sm,tcp"), TcpUse::no);
  EXPECT_EQ(tcp_use("^rc,ud"), TcpUse::unless_rdma);
  EXPECT_EQ(tcp_use("^"), TcpUse::unless_rdma);
}
