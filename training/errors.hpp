// An error the user can fix (bad flag, unreadable file, corrupt checkpoint): main prints
// the message and exits non-zero, without a stack of context.
#pragma once

#include <stdexcept>
#include <string>

namespace strata::train {

struct TrainError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace strata::train
