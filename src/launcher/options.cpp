#include "options.hpp"

#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <string_view>

namespace strata::launcher {
namespace {

// Returns an error message, or an empty string when the value was accepted.
using ApplyFn = std::string (*)(Options&, std::string_view value);

// Thrown from an option's callback: a bad value, in our words.
struct BadValue {
  std::string message;
};

std::string parse_nranks(Options& o, std::string_view v) {
  int n = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size() || n < 1)
    return "-n needs a whole number of ranks >= 1, got '" + std::string(v) + "'";
  o.nranks = n;
  return {};
}

std::string parse_grace(Options& o, std::string_view v) {
  // A day is far beyond any sensible grace period and keeps the deadline arithmetic safe.
  constexpr double kMaxGrace = 86400.0;
  std::string s(v);
  char* end = nullptr;
  double g = s.empty() ? NAN : std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !std::isfinite(g) || g < 0 || g > kMaxGrace)
    return "--grace needs a number of seconds between 0 and 86400, got '" + s + "'";
  o.grace_seconds = g;
  return {};
}

std::string parse_hosts(Options& o, std::string_view v) {
  int h = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), h);
  if (ec != std::errc() || end != v.data() + v.size() || h < 1)
    return "--hosts needs a whole number of hosts >= 1, got '" + std::string(v) + "'";
  o.hosts = h;
  return {};
}

std::string parse_rate(Options& o, std::string_view v) {
  o.link_rate = parse_link_rate(v);
  if (!o.link_rate)
    return "--link-rate needs a rate in tc's syntax between 8bit and 100gbit (e.g. 1gbit, "
           "100mbit, 500kbit), got '" + std::string(v) + "'";
  return {};
}

std::string parse_subnet_option(Options& o, std::string_view v) {
  o.subnet = parse_subnet(v);
  if (!o.subnet)
    return "--subnet needs an IPv4 network A.B.C.D/LEN with LEN 8..30 and the host bits "
           "zero (e.g. 10.231.0.0/24), got '" + std::string(v) + "'";
  return {};
}

// Rules that involve more than one option.
std::string check_combination(const Options& o) {
  if (o.hosts == 0) {
    if (o.link_rate) return "--link-rate needs --hosts (there are no links without it)";
    if (o.subnet) return "--subnet needs --hosts";
    return {};
  }
  if (o.hosts > o.nranks)
    return "--hosts " + std::to_string(o.hosts) + " is more than the " +
           std::to_string(o.nranks) + " rank(s): every host needs a rank";
  Subnet net = o.subnet.value_or(default_subnet());
  if (o.hosts > net.max_hosts())
    return "--subnet " + net.text() + " has room for " + std::to_string(net.max_hosts()) +
           " hosts, not " + std::to_string(o.hosts);
  return {};
}

// How the user spelled an option in a message: "--name" without "=value", "-x" of "-xyz".
std::string shown(const std::string& arg) {
  return arg.starts_with("--") ? arg.substr(0, arg.find('=')) : arg.substr(0, 2);
}

bool looks_like_option(const std::string& arg) { return arg.size() >= 2 && arg[0] == '-'; }

void add_value(CLI::App& app, Options& o, const std::string& names, const std::string& value_name,
               const std::string& help, ApplyFn apply) {
  app.add_option_function<std::string>(
         names,
         [&o, apply](const std::string& v) {
           if (std::string err = apply(o, v); !err.empty()) throw BadValue{err};
         },
         help)
      ->option_text(value_name)
      ->trigger_on_parse();
}

// The argument CLI11 is at (in a callback) or stopped at (after an exception).
using CurrentArg = std::function<std::string()>;

// CLI11 reads "-hx" as -h -x and "--flag=" as the flag; a flag must stand alone.
void add_flag(CLI::App& app, const std::string& names, const std::string& help, std::function<void()> set,
              const CurrentArg& current) {
  auto checked = [names, set = std::move(set), current] {
    const std::string arg = current();
    if (arg.find('=') != std::string::npos) throw BadValue{"option '" + shown(arg) + "' takes no value"};
    if (("," + names + ",").find("," + arg + ",") == std::string::npos) throw BadValue{"unknown option '" + arg + "'"};
    set();
  };
  app.add_flag_callback(names, std::move(checked), help)->disable_flag_override()->trigger_on_parse();
}

// The options, one call each: adding one (--hosts, --link-rate, ...) means adding a field to
// Options and a line here; parsing (CLI11) and the usage text follow from the app.
void define_options(CLI::App& app, Options& o, const CurrentArg& current) {
  app.set_help_flag();  // ours below, in the list, and not one that ends the parse
  // Options end at "--" or at the first argument that is not an option: the command,
  // whose own options (`strata-run -n 2 python -u x.py`) are left to it.
  app.prefix_command();
  add_value(app, o, "-n,--nranks", "N", "number of ranks to start (required, at least 1)", parse_nranks);
  add_value(app, o, "--grace", "SEC", "wait between SIGTERM and SIGKILL when stopping ranks (default 2)",
            parse_grace);
  add_flag(app, "--no-prefix", "do not prefix output lines with \"[RANK] \"", [&o] { o.prefix_output = false; },
           current);
  add_flag(app, "--keep-going",
           "when a rank fails, let the others run on (a job that shrinks its communicator and goes on, such as "
           "strata-train --on-failure shrink); the exit status is still the first failure's",
           [&o] { o.keep_going = true; }, current);
  add_value(app, o, "--hosts", "H",
            "emulate H hosts on this machine: one network namespace each, ranks spread over them "
            "in consecutive blocks (needs root)",
            parse_hosts);
  add_value(app, o, "--link-rate", "RATE",
            "with --hosts: shape each host's link to RATE in both directions (tc syntax: 1gbit, "
            "100mbit, ...; default unshaped)",
            parse_rate);
  add_value(app, o, "--subnet", "NET",
            "with --hosts: the hosts' IPv4 network, host i gets address i+1 (default 10.231.0.0/24)",
            parse_subnet_option);
  add_flag(app, "-h,--help", "print this help and exit", [&o] { o.show_help = true; }, current);
}

ParseResult usage_error(std::string message) {
  ParseResult r;
  r.action = ParseResult::Action::usage_error;
  r.error = std::move(message);
  return r;
}

}  // namespace

ParseResult parse_options(int argc, const char* const* argv) {
  ParseResult result;
  Options& opts = result.options;
  std::vector<std::string> rest;  // reversed, as CLI11 consumes it (from the back)
  for (int i = argc - 1; i >= 1; --i) rest.emplace_back(argv[i]);
  const size_t given = rest.size();
  // The last argument CLI11 consumed.
  auto current = [&] { return std::string(argv[given - rest.size()]); };
  CLI::App app;
  define_options(app, opts, current);
  std::string error;
  try {
    app.parse(rest);
  } catch (const BadValue& e) {
    error = e.message;
  } catch (const CLI::ArgumentMismatch&) {
    // A flag given a value, or a value missing at the end of the line.
    const std::string arg = current();
    const CLI::Option* opt = app.get_option_no_throw(shown(arg));
    if (opt && opt->get_expected_max() > 0)
      error = "option '" + shown(arg) + "' needs a value (" + opt->get_option_text() + ")";
    else
      error = "option '" + shown(arg) + "' takes no value";
  } catch (const CLI::ParseError& e) {
    error = e.what();
  }
  // What CLI11 left: options it does not know (each before anything reported above), then
  // "--" and the command.
  std::vector<std::string> left = app.remaining();
  if (!left.empty() && left.front() != "--" && looks_like_option(left.front()))
    return usage_error("unknown option '" + shown(left.front()) + "'");
  if (!error.empty()) return usage_error(error);
  if (!left.empty() && left.front() == "--") left.erase(left.begin());
  opts.command = std::move(left);

  if (opts.show_help) {
    result.action = ParseResult::Action::help;
    return result;
  }
  if (opts.nranks == 0) return usage_error("missing -n N (the number of ranks)");
  if (opts.command.empty()) return usage_error("missing the command to run");
  if (std::string err = check_combination(opts); !err.empty()) return usage_error(err);
  return result;
}

std::string usage_text() {
  std::string s =
      "usage: strata-run -n N [options] [--] COMMAND [ARGS...]\n"
      "\n"
      "Starts N ranks of COMMAND on this machine and forwards their output.\n"
      "\n"
      "options:\n";
  Options unused;
  CLI::App app;
  define_options(app, unused, [] { return std::string(); });
  for (const CLI::Option* opt : app.get_options()) {
    std::string left = "  ";
    left += opt->get_snames().empty() ? std::string("    ") : "-" + opt->get_snames()[0] + ", ";
    left += "--" + opt->get_lnames()[0];
    if (!opt->get_option_text().empty()) left += " " + opt->get_option_text();
    if (left.size() < 24) left.resize(24, ' ');
    else left += "  ";
    // Help wraps at 80 columns, continuation lines under the first.
    std::string line = left;
    std::string_view help = opt->get_description();
    bool first_word = true;
    while (!help.empty()) {
      size_t sp = help.find(' ');
      std::string_view word = help.substr(0, sp);
      help = sp == std::string_view::npos ? std::string_view() : help.substr(sp + 1);
      if (!first_word && line.size() + 1 + word.size() > 80) {
        s += line + "\n";
        line = std::string(24, ' ');
        first_word = true;
      }
      if (!first_word) line += ' ';
      line += word;
      first_word = false;
    }
    s += line + "\n";
  }
  s +=
      "\n"
      "Options end at \"--\" or at the first argument that is not an option.\n"
      "\n"
      "Each rank runs in its own process group with stdin from /dev/null and gets:\n"
      "  STRATA_RANK, STRATA_LOCAL_RANK        0..N-1\n"
      "  STRATA_WORLD_SIZE, STRATA_LOCAL_SIZE  N\n"
      "  STRATA_ROOT                           127.0.0.1:PORT, a free port below the ephemeral range\n"
      "  STRATA_SECRET                         32 hex digits, fresh for every job\n"
      "With --hosts, STRATA_LOCAL_RANK and STRATA_LOCAL_SIZE count the ranks of the rank's\n"
      "host and STRATA_ROOT is host 0's address, port 29500.\n"
      "These are always set anew, replacing any values strata-run itself inherited, so a\n"
      "strata-run started from inside a job starts an independent job.\n"
      "\n"
      "Every line a rank writes is printed as \"[RANK] line\", stdout to stdout and\n"
      "stderr to stderr; lines of different ranks never mix.\n"
      "\n"
      "When a rank fails (non-zero exit or killed by a signal; not with --keep-going),\n"
      "or strata-run gets SIGINT, SIGTERM or SIGHUP, every rank's process group gets\n"
      "SIGTERM, and SIGKILL after the grace period (at once on a second signal). When\n"
      "all ranks have exited, processes they left behind in their process groups are\n"
      "killed.\n"
      "\n"
      "--hosts H (root only) emulates a cluster: each host is a network namespace of its\n"
      "own (strata-PID-h0, ...), with loopback and, for H >= 2, an eth0 on a private network\n"
      "(--subnet; host i at address i+1): a veth pair joins 2 hosts, a bridge in namespace\n"
      "strata-PID-sw joins more. N ranks go in consecutive blocks, the first N%H hosts\n"
      "getting one more (-n 5 --hosts 2: ranks 0-2 on host 0, 3-4 on host 1). --link-rate\n"
      "shapes each host's link in both directions with tbf. Everything is removed when the\n"
      "job ends, however it ends; see docs/launcher.md.\n"
      "\n"
      "exit status:\n"
      "  0      every rank exited with status 0\n"
      "  S      the first rank that failed exited with status S (127: command not found)\n"
      "  128+K  the first rank that failed was killed by signal K, or strata-run itself\n"
      "         got signal K (130 for Ctrl-C)\n"
      "  2      usage error\n"
      "  1      strata-run could not start the job (with --hosts also: not root, or\n"
      "         iproute2 failed to build the cluster)\n";
  return s;
}

}  // namespace strata::launcher
