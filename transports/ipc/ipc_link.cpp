#include "transports/ipc/ipc_link.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "ground/device/ipc_handle.hpp"
#include "ground/log.hpp"
#include "strata/error.hpp"

namespace strata {

namespace {

std::string who(int peer) { return "rank " + std::to_string(peer); }

// Checking the socket costs a system call: done once in this many polls that moved nothing.
constexpr unsigned kPollsPerLivenessCheck = 256;

}  // namespace

IpcLink::IpcLink(int peer, net::Fd sock, std::shared_ptr<IpcChannelMap> channel, bool lower, size_t cache_entries)
    : Link(peer),
      sock_(std::move(sock)),
      channel_(std::move(channel)),
      out_(&channel_->get()->way[lower ? 0 : 1]),
      in_(&channel_->get()->way[lower ? 1 : 0]),
      peer_holds_(cache_entries),
      we_hold_(cache_entries) {
  declare_caps({.forwards_reductions = false,
                .streaming_stores = false,
                .memory = {MemoryKind::device},
                .needs_registration = false});
}

IpcLink::~IpcLink() {
  if (we_hold_.empty()) return;
  try {
    stream_.exec().stream_synchronize(stream_.stream());  // no task reads a mapping we drop
    we_hold_.clear([this](const PeerMappings::Mapping& m) { unimport(m); });
  } catch (const Error& e) {
    STRATA_WARN("ipc link to %s: its mappings could not be released: %s", who(peer()).c_str(), e.what());
  }
}

void IpcLink::fail(const std::string& what) const {
  throw PeerError(peer(), who(peer()) + " is unreachable: ipc " + what);
}

void IpcLink::post_send(const void* buf, size_t bytes) {
  Send s{{}, nullptr, sends_posted_};
  s.desc.bytes = bytes;
  if (bytes > 0) {
    const device::PointerInfo info = stream_.backend().memory().query(buf);
    const bool exportable = info.origin == device::Origin::allocated || info.origin == device::Origin::foreign;
    if (!exportable)
      throw InvalidArgument("ipc link to " + who(peer()) + ": the send buffer " + device::address_text(buf) +
                            " is not memory of this process's device backend (" +
                            (info.origin == device::Origin::imported ? "a peer's, imported" : "host memory") + ")");
    s.desc.id = info.id;
    s.desc.offset = static_cast<uint64_t>(static_cast<const char*>(buf) - static_cast<const char*>(info.base));
    s.desc.length = info.length;
    s.base = info.base;
    if (bytes > info.length - s.desc.offset)
      throw InvalidArgument("ipc link to " + who(peer()) + ": " + std::to_string(bytes) + " bytes at " +
                            device::address_text(buf) + " run past the end of its allocation");
  }
  sends_.push_back(s);
  ++sends_posted_;
}

void IpcLink::post_recv(void* buf, size_t bytes, const Reduction& reduce) {
  recvs_.push_back({static_cast<char*>(buf), bytes, reduce, recvs_posted_++});
}

// Descriptors of posted sends into the ring while it has room (the receiver acknowledged
// the transfer kRing before). A handle the receiver does not hold goes first.
bool IpcLink::publish() {
  bool moved = false;
  const uint64_t acked = out_->acked.load(std::memory_order_acquire);
  for (Send& s : sends_) {
    if (s.seq < published_) continue;
    if (s.seq - acked >= IpcDirection::kRing) break;
    if (s.desc.id != 0) {
      const MappingLru::Touch t = peer_holds_.touch(s.desc.id);
      s.desc.handle_sent = t.hit ? 0 : 1;
      if (!t.hit) {
        try {
          device::send_handle(sock_.get(), stream_.backend().memory().export_handle(s.base));
        } catch (const SystemError& e) {
          fail(std::string("socket: ") + e.what());
        }
      }
    }
    out_->ring[s.seq % IpcDirection::kRing] = s.desc;
    out_->published.store(s.seq + 1, std::memory_order_release);
    published_ = s.seq + 1;
    moved = true;
  }
  return moved;
}

bool IpcLink::complete_sends() {
  bool moved = false;
  const uint64_t acked = out_->acked.load(std::memory_order_acquire);
  while (!sends_.empty() && sends_.front().seq < acked) {
    sends_.pop_front();
    moved = true;
  }
  return moved;
}

const char* IpcLink::source(const IpcDescriptor& d, uint64_t seq) {
  auto check_agreed = [&](bool held) {
    if (held != (d.handle_sent == 0))
      throw InternalError("ipc link to " + who(peer()) + ": the two ends' mapping caches disagree about allocation " +
                          std::to_string(d.id));
  };
  bool held = false;
  const PeerMappings::Mapping& m = we_hold_.use(d.id, d.length, seq, held, [&] {
    check_agreed(false);
    // The handle was on the socket before the descriptor was published.
    pollfd p{sock_.get(), POLLIN, 0};
    if (::poll(&p, 1, 0) != 1) fail("socket: a descriptor announced a handle that is not there");
    device::IpcHandle h;
    try {
      h = device::recv_handle(sock_.get());
    } catch (const SystemError& e) {
      fail(std::string("socket: ") + e.what());
    }
    if (h.length() != d.length)
      throw PeerError(peer(), who(peer()) + " sent a handle of " + std::to_string(h.length()) + " bytes for an allocation of " +
                                  std::to_string(d.length));
    ++stats_.imports;
    return static_cast<char*>(stream_.backend().memory().import_handle(h));
  });
  check_agreed(held);
  if (d.offset > m.length || d.bytes > m.length - d.offset)
    throw PeerError(peer(), who(peer()) + " named " + std::to_string(d.bytes) + " bytes at offset " + std::to_string(d.offset) +
                                " of an allocation of " + std::to_string(m.length));
  return m.ptr + d.offset;
}

// Posted receives whose descriptor is published: their task goes on the stream.
bool IpcLink::start_recvs() {
  bool moved = false;
  const uint64_t published = in_->published.load(std::memory_order_acquire);
  for (Recv& r : recvs_) {
    if (r.ticket) continue;
    if (r.seq >= published) break;
    // The slot stays as it is until we acknowledge this transfer.
    const IpcDescriptor d = in_->ring[r.seq % IpcDirection::kRing];
    if (d.bytes != r.bytes)
      throw PeerError(peer(), who(peer()) + " sent " + std::to_string(d.bytes) + " bytes where this rank expected " +
                                  std::to_string(r.bytes) + " (mismatched send/receive sizes)");
    device::Execution& ex = stream_.exec();
    if (d.bytes > 0) {
      const char* src = source(d, r.seq);
      if (r.reduce) {
        const void* srcs[2] = {r.reduce.local ? r.reduce.local : r.buf, src};
        ex.reduce(r.buf, srcs, 2, r.bytes / r.reduce.elem_size, r.reduce.type, r.reduce.op, stream_.stream());
      } else {
        ex.copy(r.buf, src, r.bytes, stream_.stream());
      }
    }
    r.ticket = stream_.mark();
    ++recvs_started_;
    moved = true;
  }
  return moved;
}

bool IpcLink::finish_recvs() {
  bool moved = false;
  while (!recvs_.empty() && recvs_.front().ticket && stream_.done(recvs_.front().ticket)) {
    in_->acked.store(recvs_.front().seq + 1, std::memory_order_release);
    ++recvs_finished_;
    recvs_.pop_front();
    moved = true;
  }
  return moved;
}

void IpcLink::unimport(const PeerMappings::Mapping& m) {
  stream_.backend().memory().unimport(m.ptr);
  ++stats_.unimports;
}

bool IpcLink::peer_closed() const {
  char c;
  const ssize_t n = ::recv(sock_.get(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) fail(std::string("socket: ") + std::strerror(errno));
  return n == 0;
}

bool IpcLink::progress() {
  bool moved = complete_sends();
  moved |= publish();
  moved |= finish_recvs();
  moved |= start_recvs();
  if (we_hold_.any_retired()) we_hold_.release(recvs_finished_, [this](const PeerMappings::Mapping& m) { unimport(m); });
  // Waiting for the peer (a send not acknowledged, a receive not published), not for our
  // own stream: a peer that died after publishing left memory that stays mapped.
  const bool waiting_for_peer = !sends_.empty() || (!recvs_.empty() && recvs_.back().ticket == 0);
  if (moved || !waiting_for_peer) {
    quiet_polls_ = 0;
  } else if (++quiet_polls_ % kPollsPerLivenessCheck == 0 && peer_closed()) {
    // What the peer published or acknowledged before it ended still counts: its memory
    // stays mapped here.
    moved = complete_sends() | start_recvs();
    if (!moved) fail("socket: closed by the peer (its process ended)");
  }
  return moved;
}

IpcLink::MappingStats IpcLink::mapping_stats() const {
  MappingStats s = stats_;
  s.mapped = we_hold_.size();
  return s;
}

}  // namespace strata
