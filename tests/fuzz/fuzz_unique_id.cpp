// The unique id: 128 bytes that rank 0 hands every rank out of band (MPI_Bcast, a file,
// PMIx, the C API), and its text form in the root file and PMIx ("ok <hex>").
#include <algorithm>
#include <cctype>
#include <cstring>

#include "core/bootstrap/id_exchange.hpp"
#include "core/bootstrap/unique_id.hpp"
#include "tests/fuzz/fuzz.hpp"

using namespace strata;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  UniqueId id;
  std::memcpy(id.bytes.data(), data, std::min(size, id.bytes.size()));
  try {
    bootstrap::IdFields f = bootstrap::decode_id(id);
    FUZZ_CHECK(f.root.len > 0 && f.root.len <= sizeof f.root.ss);
    (void)f.root.str();
    (void)f.root.port();
    bootstrap::IdFields again = bootstrap::decode_id(bootstrap::encode_id(f));
    FUZZ_CHECK(again.root.len == f.root.len && std::memcmp(&again.root.ss, &f.root.ss, f.root.len) == 0);
    FUZZ_CHECK(std::memcmp(again.secret.bytes, f.secret.bytes, 16) == 0);
  } catch (const InvalidArgument&) {
  }

  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    UniqueId parsed = bootstrap::id_from_text(text, "fuzz input");
    // Only "ok " and exactly 256 hex digits are an id; they spell its bytes.
    FUZZ_CHECK(text.size() == 3 + 2 * parsed.bytes.size() && text.rfind("ok ", 0) == 0);
    for (size_t i = 0; i < parsed.bytes.size(); ++i) {
      std::string digits = text.substr(3 + 2 * i, 2);
      FUZZ_CHECK(std::isxdigit(static_cast<unsigned char>(digits[0])) &&
                 std::isxdigit(static_cast<unsigned char>(digits[1])));
      FUZZ_CHECK(std::stoul(digits, nullptr, 16) == parsed.bytes[i]);
    }
  } catch (const InvalidArgument&) {
  } catch (const PeerError&) {
    FUZZ_CHECK(text.rfind("error ", 0) == 0);
  }
  try {
    bootstrap::Secret s = bootstrap::parse_secret_hex(text);
    FUZZ_CHECK(text.size() == 32);
    (void)s;
  } catch (const InvalidArgument&) {
  }
  return 0;
}
