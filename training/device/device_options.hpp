// strata-train's --device and --precision, checked with the rest of the options.
#pragma once

#include "options.hpp"

namespace strata::train {

// Puts the default device in o.device when none was given (default_device()), and
// throws TrainError for what the chosen device cannot do yet.
void validate_device(Options& o, int world);

}  // namespace strata::train
