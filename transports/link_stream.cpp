#include "transports/link_stream.hpp"

#include "ground/log.hpp"
#include "strata/error.hpp"

namespace strata {

LinkStream::~LinkStream() {
  if (!made_) return;
  try {
    device::Execution& ex = backend_->execution();
    ex.stream_destroy(stream_);
    for (const Point& p : pending_) ex.event_destroy(p.event);
    for (device::Event e : spare_) ex.event_destroy(e);
  } catch (const Error& e) {
    STRATA_WARN("a device link's stream could not be released: %s", e.what());
  }
}

device::Backend& LinkStream::backend() {
  if (!backend_) backend_ = &device::require_backend("a device link (ipc, staging)");
  return *backend_;
}

device::Stream LinkStream::stream() {
  if (!made_) {
    stream_ = exec().stream_create();
    made_ = true;
  }
  return stream_;
}

void LinkStream::prepare(size_t events) {
  stream();
  while (spare_.size() + pending_.size() < events) spare_.push_back(exec().event_create());
}

void LinkStream::synchronize() {
  if (made_) exec().stream_synchronize(stream_);
}

uint64_t LinkStream::mark() {
  device::Execution& ex = exec();
  device::Event e = nullptr;
  if (spare_.empty()) {
    e = ex.event_create();
  } else {
    e = spare_.back();
    spare_.pop_back();
  }
  ex.event_record(e, stream());
  pending_.push_back({++marked_, e});
  return marked_;
}

bool LinkStream::done(uint64_t ticket) {
  while (passed_ < ticket && !pending_.empty() && backend_->execution().event_query(pending_.front().event)) {
    passed_ = pending_.front().ticket;
    spare_.push_back(pending_.front().event);
    pending_.pop_front();
  }
  return passed_ >= ticket;
}

}  // namespace strata
