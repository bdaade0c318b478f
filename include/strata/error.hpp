// Exceptions thrown by the C++ API, one type per category.
// The C API maps each to a strataResult_t and keeps the message as the last error.
#pragma once

#include <stdexcept>
#include <string>

namespace strata {

enum class ErrorKind {
  invalid_argument,  // a bad pointer, count, type, op, root or peer
  invalid_usage,     // use after destroy/abort, misuse of groups
  remote,            // a peer died, aborted or reported a failure
  timeout,           // no progress from a peer within STRATA_TIMEOUT
  system,            // the OS refused something (socket, shared memory, ...)
  internal,          // a bug in Strata
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& what) : std::runtime_error(what), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

class InvalidArgument : public Error {
 public:
  explicit InvalidArgument(const std::string& what) : Error(ErrorKind::invalid_argument, what) {}
};

class InvalidUsage : public Error {
 public:
  explicit InvalidUsage(const std::string& what) : Error(ErrorKind::invalid_usage, what) {}
};

class SystemError : public Error {
 public:
  explicit SystemError(const std::string& what) : Error(ErrorKind::system, what) {}
};

class InternalError : public Error {
 public:
  explicit InternalError(const std::string& what) : Error(ErrorKind::internal, what) {}
};

// A failure attributed to another rank: `peer()` names it (-1 when unknown).
class PeerError : public Error {
 public:
  PeerError(int peer, const std::string& what, ErrorKind kind = ErrorKind::remote)
      : Error(kind, what), peer_(peer) {}
  int peer() const { return peer_; }

 private:
  int peer_;
};

class TimeoutError : public PeerError {
 public:
  TimeoutError(int peer, const std::string& what) : PeerError(peer, what, ErrorKind::timeout) {}
};

}  // namespace strata
