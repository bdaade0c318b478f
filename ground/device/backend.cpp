#include "ground/device/backend.hpp"

#include <dlfcn.h>
#include <sys/stat.h>

#include <atomic>
#include <exception>
#include <mutex>
#include <string>

#include "ground/device/emulated/backend.hpp"
#include "ground/log.hpp"
#include "ground/settings.hpp"
#include "strata/error.hpp"

namespace strata::device {

namespace {

// libstrata-cuda.so beside the library this code is in.
std::string cuda_library_path() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&make_backend), &info) == 0 || !info.dli_fname) return kCudaLibrary;
  std::string self = info.dli_fname;
  const size_t slash = self.rfind('/');
  return (slash == std::string::npos ? std::string() : self.substr(0, slash + 1)) + kCudaLibrary;
}

bool driver_present() {
  // Loading the driver library is how CUDA itself finds it; it stays loaded for the backend.
  return dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL) != nullptr;
}

std::unique_ptr<Backend> load_cuda() {
  const std::string path = cuda_library_path();
  struct stat st {};
  if (stat(path.c_str(), &st) != 0)
    throw SystemError("cuda backend: " + path +
                      " does not exist (libstrata was built without nvcc, so without the CUDA backend)");
  if (!driver_present()) {
    const char* why = dlerror();
    throw SystemError(std::string("cuda backend: no NVIDIA driver on this machine (dlopen libcuda.so.1: ") +
                      (why ? why : "not found") + ")");
  }
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);  // kept until exit, as the backend
  if (!lib) throw SystemError("cuda backend: dlopen " + path + ": " + dlerror());
  auto factory = reinterpret_cast<CudaFactory>(dlsym(lib, kCudaFactory));
  if (!factory) throw SystemError("cuda backend: " + path + " has no " + kCudaFactory);
  return std::unique_ptr<Backend>(factory());
}

}  // namespace

std::unique_ptr<Backend> make_backend(std::string_view given) {
  // Checked and spelt as STRATA_DEVICE's row of the settings table declares: one list.
  const std::string choice =
      given.empty() ? "auto" : settings::choose("STRATA_DEVICE", given, settings::find("STRATA_DEVICE").choices);
  if (choice == "none") return nullptr;
  if (choice == "emulated")
    return emulated::make_backend(emulated::options_from_settings());
  if (choice == "cuda") return load_cuda();
  // auto: CUDA where a driver and a GPU exist; anything else means no device backend.
  if (!driver_present()) return nullptr;
  try {
    return load_cuda();
  } catch (const Error& e) {
    STRATA_WARN(
        "STRATA_DEVICE=auto: an NVIDIA driver exists but the CUDA backend cannot be used (%s); no device backend",
        e.what());
    return nullptr;
  }
}

namespace {
std::atomic<Backend*> made{nullptr};
}  // namespace

Backend* loaded_backend() { return made.load(std::memory_order_acquire); }

Backend* backend() {
  static std::once_flag once;
  static Backend* chosen = nullptr;  // kept until exit: its streams may run until then
  static std::exception_ptr failed;  // why it cannot be made, thrown again at every call
  std::call_once(once, [] {
    try {
      chosen = make_backend(settings::text("STRATA_DEVICE")).release();
      if (chosen) STRATA_INFO("device backend: %s (%s)", chosen->name(), chosen->device_name().c_str());
      made.store(chosen, std::memory_order_release);
    } catch (const Error&) {
      failed = std::current_exception();
    }
  });
  if (failed) std::rethrow_exception(failed);
  return chosen;
}

bool backend_possible() {
  static const std::string choice = settings::text("STRATA_DEVICE");  // read once, as backend() does
  if (choice == "emulated" || choice == "cuda") return true;
  if (choice == "none") return false;
  static const bool driver = driver_present();  // auto
  return driver;
}

Backend& require_backend(const char* what) {
  Backend* b = backend();
  if (!b) {
    const std::string set = settings::text("STRATA_DEVICE");
    throw InvalidUsage("STRATA_DEVICE=" + (set.empty() ? std::string("auto") : set) + ": " + what +
                       " needs a device backend, and there is none" +
                       (set == "none" ? "" : " (no NVIDIA driver and GPU here; STRATA_DEVICE=emulated emulates one)"));
  }
  return *b;
}

namespace {
thread_local int streams_held = 0;  // StreamsHeld scopes open on this thread
}  // namespace

StreamsHeld::StreamsHeld() { ++streams_held; }
StreamsHeld::~StreamsHeld() { --streams_held; }

void refuse_while_streams_held(const char* call) {
  if (streams_held)
    throw InternalError(std::string(call) +
                        " on the worker of a device call, while the call holds its users' streams: on a GPU this can "
                        "hang (the driver call waits for a lock the user's thread keeps while blocked on such a "
                        "stream); make it before the call is issued (Engine::prepare)");
}

}  // namespace strata::device
