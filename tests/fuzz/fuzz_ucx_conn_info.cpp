// UCX connection info (transports/ucx/ucx_conn_info.hpp), as a peer sends it over the
// control socket: what decodes must encode back to the same bytes.
#include "tests/fuzz/fuzz.hpp"
#include "transports/ucx/ucx_conn_info.hpp"

using namespace strata;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<char> bytes(reinterpret_cast<const char*>(data), reinterpret_cast<const char*>(data) + size);
  std::optional<ucx::ConnInfo> c = ucx::decode(bytes);
  if (c) {
    FUZZ_CHECK(!c->address.empty());
    FUZZ_CHECK(ucx::encode(*c) == bytes);
  }
  return 0;
}
