// Command-line options of strata-run.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cluster.hpp"
#include "tc.hpp"

namespace strata::launcher {

struct Options {
  int nranks = 0;  // 0: -n was not given
  double grace_seconds = 2.0;
  bool prefix_output = true;
  bool keep_going = false;  // a rank that fails does not stop the others
  bool show_help = false;
  int hosts = 0;                      // 0: no emulated cluster (--hosts not given)
  std::optional<LinkRate> link_rate;  // --link-rate; none: links are not shaped
  std::optional<Subnet> subnet;       // --subnet; none: default_subnet()
  std::vector<std::string> command;  // COMMAND ARGS...
};

struct ParseResult {
  enum class Action { run, help, usage_error };
  Action action = Action::run;
  Options options;
  std::string error;  // set for usage_error
};

// Options end at "--" or at the first argument that is not an option, so that the
// command's own options (`strata-run -n 2 python -u x.py`) are left to the command.
ParseResult parse_options(int argc, const char* const* argv);

std::string usage_text();

}  // namespace strata::launcher
