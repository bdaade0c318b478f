#include "ground/device/memory.hpp"

#include <cstdio>

#include "strata/error.hpp"

namespace strata::device {

std::string address_text(const void* ptr) {
  char b[32];
  std::snprintf(b, sizeof b, "%p", ptr);
  return b;
}

void refuse_free(const char* call, const void* ptr, const PointerInfo& info, MemoryKind wanted) {
  const char* kind = wanted == MemoryKind::device ? "device" : "host";
  std::string what = std::string(call) + ": " + address_text(ptr) + " is ";
  if (info.origin == Origin::unknown)
    what += "not memory this backend allocated (plain host memory)";
  else if (info.kind != wanted)
    what += std::string("not ") + kind + " memory (it is " + (info.kind == MemoryKind::device ? "device" : "host") +
            " memory)";
  else if (info.origin == Origin::imported)
    what += "a peer's allocation imported here (unimport it)";
  else if (info.origin == Origin::registered)
    what += "host memory registered with a communicator, not allocated by Strata (deregister it)";
  else if (info.origin == Origin::foreign)
    what += "device memory this backend did not allocate";
  else if (info.base != ptr)
    what += "inside an allocation, not its start (" + address_text(info.base) + ")";
  else
    what += "not an allocation this backend can free";
  throw InvalidArgument(what);
}

}  // namespace strata::device
