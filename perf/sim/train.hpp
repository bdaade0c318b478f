// strata-sim --train: a strata-train layout's communication per step, predicted. Each
// kind of group's traffic per step comes from training/traffic.cpp; one call of each kind
// is simulated on every group of that kind at once, with the library's plans (its tuner's
// choice per group, on the group's own hierarchy, as a split communicator gets it).
#pragma once

#include <string>
#include <vector>

#include "simulate.hpp"

namespace strata::sim {

struct CommLine {
  std::string what;     // "tensor parallel", "pipeline", "data parallel", ...
  double bytes = 0;     // per step on one rank of the stage (training/traffic.cpp)
  double calls = 0;     // per step
  double seconds = 0;   // per step
  std::string unit;     // what one call is
};

struct StageComm {
  std::vector<CommLine> lines;
  double seconds = 0;
};

struct TrainPrediction {
  std::vector<std::string> header;  // what was laid out where
  std::vector<StageComm> stages;    // per pipeline stage
  size_t busiest = 0;
};

// args: strata-train's flags (args[0] the program). Throws strata::train::TrainError for
// flags the trainer refuses on this cluster's rank count.
TrainPrediction predict_training(const Model& m, const std::vector<std::string>& args);

// Prints the prediction (or strata-train's usage for -h); returns the exit status.
int train_main(const Model& m, const std::vector<std::string>& args);

}  // namespace strata::sim
