// The ipc row's setup: every rank listens on an abstract AF_UNIX socket named after the
// communicator (secret, tag) and its rank; in connect(), the lower rank of each pair
// connects to the higher one's and sends a hello (secret, tag, ranks) with the pair's
// channel memfd, which it created; the higher rank's connect() takes what has arrived and
// says "not yet" (null) until that pair's hello is there. Neither waits for the other. The socket stays the pair's, for the allocation handles the link
// sends. The connection info each rank sends is its mapping cache size; both use the
// smaller (the two caches must evict alike).
#include <sys/socket.h>
#include <sys/un.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>

#include "ground/device/backend.hpp"
#include "ground/fd_passing.hpp"
#include "ground/settings.hpp"
#include "strata/error.hpp"
#include "transports/agreed_size.hpp"
#include "transports/ipc/ipc_link.hpp"
#include "transports/link_setup.hpp"

namespace strata {

namespace {

constexpr SizeProposal kCacheEntries{"ipc", 0x31504953 /* "SIP1" */, 1};

struct IpcHello {
  uint32_t magic;  // "SIH1"
  int32_t from, to;
  uint32_t pad;
  uint64_t tag;
  uint8_t secret[16];
  static constexpr uint32_t kMagic = 0x31484953;
};

std::string who(int peer) { return "rank " + std::to_string(peer); }
std::string errno_text(const char* call) { return std::string(call) + ": " + std::strerror(errno); }

// The abstract socket address of `rank` in the communicator (secret, tag): nothing in the
// file system, gone with the socket.
sockaddr_un address_of(const uint8_t* secret, uint64_t tag, int rank, socklen_t& len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  char name[96];
  int n = std::snprintf(name, sizeof name, "strata-ipc-%02x%02x%02x%02x%02x%02x-%llx-%d", secret[0], secret[1], secret[2],
                        secret[3], secret[4], secret[5], static_cast<unsigned long long>(tag), rank);
  std::memcpy(a.sun_path + 1, name, static_cast<size_t>(n));  // sun_path[0] == 0: abstract
  len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + static_cast<size_t>(n));
  return a;
}

class IpcSetup final : public LinkSetup {
 public:
  explicit IpcSetup(const SetupContext& ctx)
      : ctx_(ctx),
        cache_entries_(static_cast<size_t>(settings::integer("STRATA_IPC_CACHE_ENTRIES"))) {
    socklen_t len = 0;
    const sockaddr_un a = address_of(ctx.secret, ctx.comm_tag, ctx.rank, len);
    listener_ = net::Fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!listener_.valid()) throw SystemError("ipc: " + errno_text("socket"));
    if (::bind(listener_.get(), reinterpret_cast<const sockaddr*>(&a), len) != 0)
      throw SystemError("ipc: " + errno_text("bind of this rank's abstract socket"));
    if (::listen(listener_.get(), 1024) != 0) throw SystemError("ipc: " + errno_text("listen"));
    entries_.assign(static_cast<size_t>(ctx.nranks), 0);
  }

  std::vector<char> local_info(int) override { return propose_size(kCacheEntries, cache_entries_); }

  std::unique_ptr<Link> connect(int peer, const std::vector<char>& remote) override {
    const size_t entries = agreed_size(kCacheEntries, cache_entries_, peer, remote);
    entries_[static_cast<size_t>(peer)] = entries;
    const bool lower = ctx_.rank < peer;
    std::optional<Pair> pair = lower ? call(peer) : arrived_from(peer);
    if (!pair) return nullptr;
    return std::make_unique<IpcLink>(peer, std::move(pair->sock), std::move(pair->channel), lower, entries);
  }

  std::string describe(int peer) const override {
    return "same host, " + std::to_string(entries_[static_cast<size_t>(peer)]) + " mappings cached";
  }

 private:
  struct Pair {
    net::Fd sock;
    std::shared_ptr<IpcChannelMap> channel;
  };

  // The lower rank: connect, then hello and the new channel. Nothing to wait for: the
  // peer listens since before it sent its connection info, and the hello fits the socket.
  Pair call(int peer) {
    socklen_t len = 0;
    const sockaddr_un a = address_of(ctx_.secret, ctx_.comm_tag, peer, len);
    net::Fd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!s.valid()) throw SystemError("ipc: " + errno_text("socket"));
    if (::connect(s.get(), reinterpret_cast<const sockaddr*>(&a), len) != 0)
      throw SystemError("ipc: cannot reach " + who(peer) + "'s socket (" + errno_text("connect") +
                        "; the same host identity in another network namespace?)");
    Pair p{std::move(s), IpcChannelMap::create()};
    IpcHello h{IpcHello::kMagic, ctx_.rank, peer, 0, ctx_.comm_tag, {}};
    std::memcpy(h.secret, ctx_.secret, sizeof h.secret);
    const int fd = p.channel->fd();
    send_with_fds(p.sock.get(), &h, sizeof h, std::span<const int>(&fd, 1));
    return p;
  }

  // The higher rank: the pair of `peer` if its hello has come (others are kept for later).
  std::optional<Pair> arrived_from(int peer) {
    for (;;) {
      if (auto it = arrived_.find(peer); it != arrived_.end()) {
        Pair p = std::move(it->second);
        arrived_.erase(it);
        return p;
      }
      pollfd pfd{listener_.get(), POLLIN, 0};
      const int r = ::poll(&pfd, 1, 0);
      if (r < 0 && errno != EINTR) throw SystemError("ipc: " + errno_text("poll"));
      if (r <= 0) return std::nullopt;
      net::Fd s(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!s.valid()) return std::nullopt;
      take_hello(std::move(s));
    }
  }

  // A connection that does not present the communicator's hello is dropped.
  void take_hello(net::Fd s) {
    timeval tv{5, 0};  // a stranger that connects and says nothing does not hold setup up
    setsockopt(s.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    IpcHello h{};
    int fd = -1;
    try {
      if (recv_with_fds(s.get(), &h, sizeof h, std::span<int>(&fd, 1)) != 1) return;
    } catch (const SystemError&) {
      return;
    }
    net::Fd channel_fd(fd);
    const bool ours = h.magic == IpcHello::kMagic && h.to == ctx_.rank && h.tag == ctx_.comm_tag &&
                      std::memcmp(h.secret, ctx_.secret, sizeof h.secret) == 0 && h.from >= 0 && h.from < ctx_.rank &&
                      !arrived_.count(h.from);
    if (!ours) return;
    timeval none{0, 0};
    setsockopt(s.get(), SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
    arrived_[h.from] = {std::move(s), IpcChannelMap::open(channel_fd.release(), h.from)};
  }

  SetupContext ctx_;
  size_t cache_entries_;
  net::Fd listener_;
  std::map<int, Pair> arrived_;  // hellos of peers not connected yet
  std::vector<size_t> entries_;  // by peer: the cache size both ends use
};

}  // namespace

const LinkSetupTransport kIpcTransport = kOffering<IpcSetup, &device::backend_possible>;

}  // namespace strata
