// Command-line options of strata-run.
#pragma once

#include <string>
#include <vector>

namespace strata::launcher {

struct Options {
  int nranks = 0;  // 0: -n was not given
  double grace_seconds = 2.0;
  bool prefix_output = true;
  bool show_help = false;
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
