// Tests that need a second process start this binary again in a role (its first argument),
// so the second process has a device backend of its own (neither CUDA nor the emulated
// backend's stream threads survive a plain fork).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tests/common/process.hpp"

namespace strata_test {

bool is_role(const char* flag);
// Runs the role named by argv[1]; its return value is the process's exit code.
int run_role(int argc, char** argv);

// This binary in role `flag` with `args`, under this process's STRATA_DEVICE and
// STRATA_EMULATED_DELAY_US plus `env`. File descriptors this process holds without
// close-on-exec are inherited. Its stderr goes with its stdout.
Process start_role(const std::string& flag, const std::vector<std::string>& args,
                   const std::map<std::string, std::string>& env = {});
// How start_role starts it (for run_all, which starts several at once).
SpawnSpec role_spec(const std::string& flag, const std::vector<std::string>& args,
                    const std::map<std::string, std::string>& env = {});

// The roles (each defined beside the test that uses it).
int ipc_peer_role(int argc, char** argv);          // test_ipc.cpp
int no_backend_role(int argc, char** argv);        // test_memory.cpp
int held_stream_role(int argc, char** argv);       // test_held_stream.cpp
int implicit_sync_hang_role(int argc, char** argv);  // test_blocking_rules.cpp

}  // namespace strata_test
