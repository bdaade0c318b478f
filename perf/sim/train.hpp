// strata-sim --train: a strata-train layout's communication per step, predicted.
#pragma once

#include <string>
#include <vector>

#include "simulate.hpp"

namespace strata::sim {

// args: the program name, then strata-train's flags. Prints the prediction; returns the
// exit status.
int train_main(const Model& m, const std::vector<std::string>& args);

}  // namespace strata::sim
