// Pure helpers of the UCX transport (no UCX needed): reading the UCX settings a user chose,
// to decide what Strata may adjust in the UCP configuration.
#pragma once

#include <string_view>

namespace strata::ucx {

// Whether UCX may use its tcp transport, from UCX_TLS (null when unset): `yes` when the
// list names tcp, `no` when it leaves tcp out, `unless_rdma` when tcp is only one of
// everything UCX has ("all", unset, or an exclusion list that keeps it): UCX then carries
// traffic between hosts over an RDMA transport where there is one.
enum class TcpUse { no, yes, unless_rdma };

// UCX_TLS as UCX reads it: transports or aliases separated by commas, each with an
// optional ":aux" style suffix; a leading '^' excludes the ones listed instead.
inline TcpUse tcp_use(const char* ucx_tls) {
  std::string_view list = ucx_tls ? ucx_tls : "";
  bool exclude = !list.empty() && list.front() == '^';
  if (exclude) list.remove_prefix(1);
  bool tcp = false, all = list.empty();
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view entry = list.substr(0, comma);
    entry = entry.substr(0, entry.find(':'));
    tcp |= entry == "tcp";
    all |= entry == "all";
    list.remove_prefix(comma == std::string_view::npos ? list.size() : comma + 1);
  }
  if (exclude) return tcp ? TcpUse::no : TcpUse::unless_rdma;
  if (tcp) return TcpUse::yes;
  return all ? TcpUse::unless_rdma : TcpUse::no;
}

}  // namespace strata::ucx
