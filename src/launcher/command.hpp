// Running the iproute2 tools (`ip`, `tc`) that set up and tear down an emulated cluster.
#pragma once

#include <string>
#include <vector>

namespace strata::launcher {

struct CommandResult {
  int wait_status = 0;
  std::string output;  // stdout and stderr together
  bool ok() const;
};

// Runs `argv` (argv[0] looked up in PATH, then in /usr/sbin, /sbin, /usr/bin, /bin) with
// stdin from /dev/null, and waits for it. The tool runs in its own process group, so a
// Ctrl-C at the terminal cannot cut setup or teardown short. Throws std::system_error
// only when no process can be made; a tool that cannot be executed exits with 127.
CommandResult run_command(const std::vector<std::string>& argv);

// run_command, and a std::runtime_error naming the command and showing its output when
// it does not exit with status 0.
void run_checked(const std::vector<std::string>& argv);

// "ip -n X link set lo up": the command as a shell would show it, for messages.
std::string command_text(const std::vector<std::string>& argv);

}  // namespace strata::launcher
