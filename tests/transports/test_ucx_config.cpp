// UCX transport: reading UCX_TLS to tell whether UCX may use tcp (where Strata turns
// zero-copy sends off).
#include <gtest/gtest.h>

#include "transports/ucx/ucx_config.hpp"

using namespace strata::ucx;

TEST(UcxTcpUse, ReadsUcxTlsAsUcxDoes) {
  struct Case {
    const char* tls;
    TcpUse want;
  };
  const Case cases[] = {
      // Unset or "all": tcp is one of everything, used between hosts only without RDMA.
      {nullptr, TcpUse::unless_rdma}, {"", TcpUse::unless_rdma}, {"all", TcpUse::unless_rdma},
      {"sm,all", TcpUse::unless_rdma},
      // Lists naming tcp, with or without an aux suffix.
      {"tcp", TcpUse::yes}, {"tcp,self", TcpUse::yes}, {"sm,self,tcp", TcpUse::yes}, {"rc,tcp:aux", TcpUse::yes},
      // Lists without it; names that merely contain the letters are other transports.
      {"sm,self", TcpUse::no}, {"rc,ud:aux,self", TcpUse::no}, {"tcpx,rdmacm", TcpUse::no},
      // Exclusion lists.
      {"^tcp", TcpUse::no}, {"^sm,tcp", TcpUse::no}, {"^rc,ud", TcpUse::unless_rdma}, {"^", TcpUse::unless_rdma},
  };
  for (const Case& c : cases) EXPECT_EQ(tcp_use(c.tls), c.want) << "UCX_TLS=" << (c.tls ? c.tls : "(unset)");
}

TEST(UcxMappedMemoryUse, ReadsUcxTlsAsUcxDoes) {
  struct Case {
    const char* tls;
    bool want;
  };
  const Case cases[] = {
      // Everything UCX has, or a list naming a shared-memory transport or alias.
      {nullptr, true}, {"", true}, {"all", true}, {"sm,self", true}, {"shm", true}, {"posix,tcp", true},
      {"sysv", true}, {"mm:aux", true}, {"self,xpmem", true},
      // Lists without one: tcp or RDMA only, or cma, which cannot take puts into a region.
      {"tcp,self", false}, {"rc,ud", false}, {"cma,tcp", false}, {"smx", false},
      // Exclusion lists.
      {"^sm", false}, {"^shm,tcp", false}, {"^posix,sysv,xpmem", false}, {"^posix", true}, {"^tcp", true},
  };
  for (const Case& c : cases)
    EXPECT_EQ(mapped_memory_use(c.tls), c.want) << "UCX_TLS=" << (c.tls ? c.tls : "(unset)");
}
