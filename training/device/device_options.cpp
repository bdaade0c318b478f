#include "device/device_options.hpp"

#include "device/choose.hpp"
#include "errors.hpp"

namespace strata::train {

void validate_device(Options& o, int world) {
  if (o.device.empty()) o.device = default_device();
  if (o.precision == "bf16" && o.device != "cuda")
    throw TrainError("--precision bf16 needs --device cuda (its products run on bf16 tensor cores); --device " +
                     o.device + " computes in fp32");
  // The groups call the communicator's stream forms on device buffers (group.hpp); what
  // has not been run on a device with several ranks is refused by name.
  if (o.device != "host" && world > 1 && o.on_failure != "stop")
    throw TrainError("--device " + o.device + " with --on-failure " + o.on_failure +
                     ": going on after a failure is not implemented on a device (its recovery moves host "
                     "buffers); use --device host, or --on-failure stop");
}

}  // namespace strata::train
