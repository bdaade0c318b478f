// The staging row's setup: each link wraps the host link of its pair (made before any
// device row's). The connection info each rank sends is its chunk size; both ends use the
// smaller, so they cut every transfer alike (the host link matches transfers by order and
// size).

#include "ground/device/backend.hpp"
#include "ground/settings.hpp"
#include "strata/error.hpp"
#include "transports/agreed_size.hpp"
#include "transports/link_setup.hpp"
#include "transports/staging/staging_link.hpp"

namespace strata {

namespace {

constexpr SizeProposal kChunkBytes{"staging", 0x31545353 /* "SST1" */, 64};

std::string who(int peer) { return "rank " + std::to_string(peer); }

class StagingSetup final : public LinkSetup {
 public:
  explicit StagingSetup(const SetupContext& ctx)
      : ctx_(ctx),
        chunk_(staging_chunk_bytes()),
        slots_(static_cast<size_t>(settings::integer("STRATA_STAGING_SLOTS"))),
        chunks_(static_cast<size_t>(ctx.nranks), 0) {
    if (!ctx.host_links) throw InternalError("staging set up without the host links it wraps");
  }

  std::vector<char> local_info(int) override { return propose_size(kChunkBytes, chunk_); }

  std::unique_ptr<Link> connect(int peer, const std::vector<char>& remote) override {
    const size_t chunk = agreed_size(kChunkBytes, chunk_, peer, remote);
    Link* host = (*ctx_.host_links)[static_cast<size_t>(peer)].get();
    if (!host) throw InternalError("staging to " + who(peer) + ": no host link to wrap");
    chunks_[static_cast<size_t>(peer)] = chunk;
    return std::make_unique<StagingLink>(peer, *host, chunk, slots_);
  }

  std::string describe(int peer) const override {
    return "over " + std::string((*ctx_.host_links)[static_cast<size_t>(peer)]->name()) + ", chunks of " +
           std::to_string(chunks_[static_cast<size_t>(peer)]) + " B, " + std::to_string(slots_) + " pinned slots each way";
  }

 private:
  SetupContext ctx_;
  size_t chunk_, slots_;
  std::vector<size_t> chunks_;  // by peer: the chunk size both ends use
};

}  // namespace

size_t staging_chunk_bytes() {
  const auto chunk = static_cast<size_t>(settings::integer("STRATA_STAGING_CHUNK_BYTES"));
  if (chunk % 64 != 0)
    throw InvalidArgument("STRATA_STAGING_CHUNK_BYTES=" + std::to_string(chunk) + " is not a multiple of 64");
  return chunk;
}

const LinkSetupTransport kStagingTransport = kOffering<StagingSetup, &device::backend_possible>;

}  // namespace strata
