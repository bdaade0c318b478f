// The device tests' main: runs the gtest suite on the process's backend (STRATA_DEVICE),
// or, with a role as first argument, one side of a test that needs a second process
// (started by the test with fork and exec, so it has a backend of its own).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "device_test.hpp"
#include "process_roles.hpp"
#include "strata/error.hpp"

namespace strata_test {

Backend& dev() { return *strata::device::backend(); }
bool on_emulated() { return std::strcmp(dev().name(), "emulated") == 0; }

}  // namespace strata_test

int main(int argc, char** argv) {
  if (argc >= 2 && argv[1][0] == '-' && argv[1][1] == '-' && strata_test::is_role(argv[1]))
    return strata_test::run_role(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  // Death tests start a fresh copy of this binary: the backend's stream threads do not
  // survive a fork.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  if (GTEST_FLAG_GET(list_tests)) return RUN_ALL_TESTS();  // listing needs no backend (CTest's discovery)
  try {
    if (!strata::device::backend()) {
      std::fprintf(stderr, "test_device: no device backend (STRATA_DEVICE=emulated runs these tests on the CPU)\n");
      return 1;
    }
  } catch (const strata::Error& e) {
    std::fprintf(stderr, "test_device: %s\n", e.what());
    return 1;
  }
  std::printf("device backend: %s (%s)\n", strata_test::dev().name(), strata_test::dev().device_name().c_str());
  return RUN_ALL_TESTS();
}
