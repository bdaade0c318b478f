// strata-sim built without the trainer's library (strata_train needs OpenBLAS): --train
// says so.
#include <stdexcept>

#include "train.hpp"

namespace strata::sim {

TrainPrediction predict_training(const Model&, const std::vector<std::string>&) {
  throw std::runtime_error("--train needs strata-train's library, which this build lacks (OpenBLAS was not found)");
}

int train_main(const Model& m, const std::vector<std::string>& args) {
  predict_training(m, args);
  return 1;
}

}  // namespace strata::sim
