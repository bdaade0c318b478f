// An error the user can fix (bad flag, unreadable file, corrupt checkpoint): main prints
// the message and exits non-zero, without a stack of context.
#pragma once

#include <stdexcept>
#include <string>

namespace strata::train {

struct TrainError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A rank failed in an exchange between islands (DiLoCo's outer sync or the job's
// communicator), as opposed to inside this rank's island: with --on-failure continue the
// islands that are whole go on without the one that lost it.
struct OuterFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace strata::train
