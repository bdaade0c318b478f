#include "device/device_options.hpp"

#include "device/choose.hpp"
#include "errors.hpp"

namespace strata::train {

void validate_device(Options& o, int world) {
  if (o.device.empty()) o.device = default_device();
  if (o.precision == "bf16" && o.device != "cuda")
    throw TrainError("--precision bf16 needs --device cuda (its products run on bf16 tensor cores); --device " +
                     o.device + " computes in fp32");
  // Until the trainer's groups call the communicator's stream forms on device buffers, its
  // collectives would treat device memory as host memory (docs/training.md, "Devices").
  if (o.device != "host" && world > 1)
    throw TrainError("--device " + o.device + " runs as one process for now: a job of " + std::to_string(world) +
                     " ranks needs the trainer's groups on the device collectives, which they do not use yet; use "
                     "--device host with strata-run");
}

}  // namespace strata::train
