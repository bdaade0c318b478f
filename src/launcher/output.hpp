// Forwarding the ranks' output line by line.
#pragma once

#include <string>
#include <string_view>
#include <utility>

namespace strata::launcher {

// One of strata-run's own outputs (stdout or stderr). Every buffer handed to write()
// goes out whole before the next one starts, and strata-run is single-threaded, so a
// line is never split by another rank's output. Writes go straight to the descriptor
// (no stdio buffering): output appears as soon as a rank's line is complete.
class OutputSink {
 public:
  explicit OutputSink(int fd) : fd_(fd) {}
  // If the destination is gone (EPIPE, ...) output is dropped from then on: strata-run
  // must keep reading the ranks' pipes regardless, or the ranks would block.
  void write(std::string_view data);

 private:
  int fd_;
  bool broken_ = false;
};

// Cuts one rank's stream into lines and hands each, prefixed, to a sink.
class LineForwarder {
 public:
  LineForwarder(OutputSink& sink, std::string prefix)
      : sink_(&sink), prefix_(std::move(prefix)) {}
  // Emits every line completed by `data`; keeps the unterminated rest.
  void feed(std::string_view data);
  // End of stream: emits an unterminated last line, with a newline added.
  void finish();

 private:
  // A line longer than this is emitted in pieces of this size (each as its own line),
  // so that a rank writing without newlines cannot make strata-run grow without bound.
  static constexpr size_t kMaxLine = 1 << 20;

  OutputSink* sink_;
  std::string prefix_;
  std::string partial_;
};

}  // namespace strata::launcher
