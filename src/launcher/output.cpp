#include "output.hpp"

#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace strata::launcher {

void OutputSink::write(std::string_view data) {
  while (!data.empty() && !broken_) {
    ssize_t n = ::write(fd_, data.data(), data.size());
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // Someone handed us a non-blocking stdout; wait until it takes more.
      pollfd p{fd_, POLLOUT, 0};
      ::poll(&p, 1, -1);
    } else {
      broken_ = true;
    }
  }
}

void LineForwarder::feed(std::string_view data) {
  std::string out;
  while (!data.empty()) {
    size_t nl = data.find('\n');
    if (nl == std::string_view::npos) {
      partial_.append(data);
      break;
    }
    out += prefix_;
    out += partial_;
    out.append(data.substr(0, nl + 1));
    partial_.clear();
    data.remove_prefix(nl + 1);
  }
  if (partial_.size() >= kMaxLine) {
    out += prefix_;
    out += partial_;
    out += '\n';
    partial_.clear();
  }
  // One write per chunk read from the rank: prompt, and cheap for chatty ranks.
  if (!out.empty()) sink_->write(out);
}

void LineForwarder::finish() {
  if (partial_.empty()) return;
  sink_->write(prefix_ + partial_ + "\n");
  partial_.clear();
}

}  // namespace strata::launcher
