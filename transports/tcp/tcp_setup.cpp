// The tcp row's setup: its links take the data sockets the mesh connected beside each
// control socket (STRATA_TCP_NSOCKS per pair on different hosts); nothing more is sent.
#include "transports/link_setup.hpp"
#include "transports/tcp/tcp_link.hpp"

namespace strata {

namespace {

class TcpSetup final : public LinkSetup {
 public:
  explicit TcpSetup(const SetupContext& ctx) : ctx_(ctx), nsockets_(static_cast<size_t>(ctx.nranks)) {}

  std::unique_ptr<Link> connect(int peer, const std::vector<char>&) override {
    std::vector<net::Fd>& sockets = (*ctx_.sockets)[static_cast<size_t>(peer)];
    nsockets_[static_cast<size_t>(peer)] = sockets.size();
    return std::make_unique<TcpLink>(peer, std::move(sockets), ctx_.cfg->staging_bytes);
  }

  std::string describe(int peer) const override {
    return std::to_string(nsockets_[static_cast<size_t>(peer)]) + " sockets, " + ctx_.address[static_cast<size_t>(peer)];
  }

 private:
  SetupContext ctx_;
  std::vector<size_t> nsockets_;  // by peer
};

}  // namespace

const LinkSetupTransport kTcpTransport = kAlwaysThere<TcpSetup>;

}  // namespace strata
