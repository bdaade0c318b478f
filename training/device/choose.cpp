#include "device/choose.hpp"

#include <dlfcn.h>
#include <stdlib.h>

#include <mutex>

#include "errors.hpp"
#include "strata/error.hpp"

namespace strata::train {
namespace {

// The process's backend, made `device` if the environment does not choose.
strata::device::Backend& backend_named(const std::string& device) {
  const char* env = std::getenv("STRATA_DEVICE");
  if (!env || !*env) ::setenv("STRATA_DEVICE", device.c_str(), 1);
  strata::device::Backend* b = nullptr;
  try {
    b = strata::device::backend();
  } catch (const strata::Error& e) {
    throw TrainError("--device " + device + ": " + e.what());
  }
  const std::string have = b ? b->name() : "none";
  if (have != device)
    throw TrainError("--device " + device + ", but the device backend is " + have + " (STRATA_DEVICE=" +
                     (env && *env ? env : "auto") + "): set STRATA_DEVICE=" + device + " or leave it unset");
  return *b;
}

// libstrata-train-cuda.so beside libstrata, as the device layer finds libstrata-cuda.so.
std::string cuda_kernels_path() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&strata::device::make_backend), &info) == 0 || !info.dli_fname)
    return kCudaKernelsLibrary;
  const std::string self = info.dli_fname;
  const size_t slash = self.rfind('/');
  return (slash == std::string::npos ? std::string() : self.substr(0, slash + 1)) + kCudaKernelsLibrary;
}

Kernels* load_cuda_kernels(strata::device::Backend& backend, bool bf16) {
  const std::string path = cuda_kernels_path();
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);  // kept until exit, as the kernels
  if (!lib)
    throw TrainError("--device cuda: cannot load " + path + " (" + dlerror() +
                     "; it is built where nvcc is found, beside libstrata-cuda.so)");
  auto factory = reinterpret_cast<CudaKernelsFactory>(dlsym(lib, kCudaKernelsFactory));
  if (!factory) throw TrainError("--device cuda: " + path + " has no " + kCudaKernelsFactory);
  try {
    return factory(&backend, bf16);
  } catch (const strata::Error& e) {
    throw TrainError(std::string("--device cuda: ") + e.what());
  }
}

}  // namespace

const Kernels& kernels_for(const std::string& device, bool bf16) {
  if (device == "host") return cpu_kernels();
  if (device != "emulated" && device != "cuda")
    throw TrainError("--device needs host, emulated or cuda, got '" + device + "'");
  static std::mutex m;
  static Kernels* made = nullptr;  // kept until exit: the backend's streams may run until then
  std::lock_guard lk(m);
  strata::device::Backend& backend = backend_named(device);
  if (bf16 && device != "cuda") throw TrainError("bf16 products need --device cuda");
  if (!made) made = device == "cuda" ? load_cuda_kernels(backend, bf16) : emulated_kernels(backend).release();
  return *made;
}

std::string default_device() {
  // Without a driver there is no GPU: say so without fixing the process's backend (which
  // a later --device emulated in the same process could then not have).
  const char* env = std::getenv("STRATA_DEVICE");
  const std::string chosen = env ? env : "";
  if (chosen == "emulated" || chosen == "none") return "host";
  if (chosen != "cuda" && !dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) return "host";
  try {
    strata::device::Backend* b = strata::device::backend();
    return b && std::string(b->name()) == "cuda" ? "cuda" : "host";
  } catch (const strata::Error&) {
    return "host";  // STRATA_DEVICE=cuda that cannot load says so when --device cuda asks for it
  }
}

}  // namespace strata::train
