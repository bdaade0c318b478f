#include "train.hpp"

#include <stdexcept>

namespace strata::sim {
int train_main(const Model&, const std::vector<std::string>&) { throw std::runtime_error("--train: not written yet"); }
}  // namespace strata::sim
