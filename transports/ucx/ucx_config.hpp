// Pure helpers of the UCX transport (no UCX needed): reading the UCX settings a user chose,
// to decide what Strata may adjust in the UCP configuration and where it puts.
#pragma once

#include <initializer_list>
#include <string_view>

namespace strata::ucx {

// UCX_TLS as UCX reads it: transports or aliases separated by commas, each with an
// optional ":aux" style suffix; a leading '^' excludes the ones listed instead.
class TlsList {
 public:
  explicit TlsList(const char* ucx_tls) : list_(ucx_tls ? ucx_tls : "") {
    exclude_ = !list_.empty() && list_.front() == '^';
    if (exclude_) list_.remove_prefix(1);
  }
  bool excludes() const { return exclude_; }
  // Everything UCX has: unset, "all", or an exclusion list (which keeps what it omits).
  bool everything() const { return exclude_ || list_.empty() || names({"all"}); }
  // Whether the list names any of `tls`.
  bool names(std::initializer_list<std::string_view> tls) const {
    for (std::string_view rest = list_; !rest.empty();) {
      size_t comma = rest.find(',');
      std::string_view entry = rest.substr(0, comma);
      entry = entry.substr(0, entry.find(':'));
      for (std::string_view t : tls)
        if (entry == t) return true;
      rest.remove_prefix(comma == std::string_view::npos ? rest.size() : comma + 1);
    }
    return false;
  }

 private:
  std::string_view list_;
  bool exclude_ = false;
};

// Whether UCX may use its tcp transport, from UCX_TLS (null when unset): `yes` when the
// list names tcp, `no` when it leaves tcp out, `unless_rdma` when tcp is only one of
// everything UCX has ("all", unset, or an exclusion list that keeps it): UCX then carries
// traffic between hosts over an RDMA transport where there is one.
enum class TcpUse { no, yes, unless_rdma };

inline TcpUse tcp_use(const char* ucx_tls) {
  TlsList l(ucx_tls);
  if (l.excludes()) return l.names({"tcp"}) ? TcpUse::no : TcpUse::unless_rdma;
  if (l.names({"tcp"})) return TcpUse::yes;
  return l.everything() ? TcpUse::unless_rdma : TcpUse::no;
}

// Whether UCX may reach a peer on this host through a shared-memory segment (posix, sysv or
// xpmem, or an alias covering them): what makes a put into the peer's region one copy.
// UCX prefers these to tcp on one host, so where they are allowed they carry the puts.
inline bool mapped_memory_use(const char* ucx_tls) {
  TlsList l(ucx_tls);
  if (l.excludes()) return !l.names({"sm", "shm", "mm"}) && !(l.names({"posix"}) && l.names({"sysv"}) && l.names({"xpmem"}));
  return l.everything() || l.names({"sm", "shm", "mm", "posix", "sysv", "xpmem"});
}

}  // namespace strata::ucx
