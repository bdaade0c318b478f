#include "options.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace perf {

namespace {

// Thrown from a flag's callback to stop the parse: a bad value (its message), or -h.
struct BadValue {
  std::string message;
};
struct HelpRequested {};

// "a b c" from a table of names, for the messages.
template <class Names>
std::string listed(const Names& names) {
  std::string out;
  for (const char* n : names) out += (out.empty() ? "" : " ") + std::string(n);
  return out;
}

// Every collective's name, from the list, so the messages below never miss one.
std::string coll_names(const char* sep) {
  std::string out;
  for (const Coll& c : all_colls()) out += (out.empty() ? "" : sep) + std::string(name(c));
  return out;
}

bool parse_int(std::string_view s, long long lo, long long hi, long long& out) {
  if (s.empty()) return false;
  std::string str(s);
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(str.c_str(), &end, 0);
  if (errno != 0 || end == str.c_str() || *end != '\0' || v < lo || v > hi) return false;
  out = v;
  return true;
}

struct Flag {
  char short_name;
  const char* long_name;
};

// nccl-tests' flags; every one takes a value (-h is added apart).
const std::vector<Flag>& flags() {
  static const std::vector<Flag> v = {
      {'b', "minbytes"}, {'e', "maxbytes"}, {'i', "stepbytes"},    {'f', "stepfactor"},
      {'n', "iters"},    {'w', "warmup_iters"}, {'c', "check"},    {'d', "datatype"},
      {'o', "op"},       {'r', "root"},     {'a', "average"},      {'z', "blocking"},
      {'t', "nthreads"}, {'g', "ngpus"},    {'m', "agg_iters"},    {'p', "parallel_init"},
      {'y', "stream_null"}, {'G', "cudagraph"}, {'C', "report_cputime"}, {'J', "json"},
      {'I', "in_place"},
  };
  return v;
}

std::string apply(Options& o, char flag, const std::string& value) {
  long long n = 0;
  auto bad = [&](const char* what) {
    return std::string("invalid value '") + value + "' for -" + flag + " (" + what + ")";
  };
  switch (flag) {
    case 'b':
    case 'e':
    case 'i': {
      auto v = parse_size(value);
      if (!v) return bad("expected a size such as 8, 1K, 64M, 1G");
      (flag == 'b' ? o.min_bytes : flag == 'e' ? o.max_bytes : o.step_bytes) = *v;
      return {};
    }
    case 'f':
      if (!parse_int(value, 1, 1ll << 30, n)) return bad("expected an integer >= 1");
      o.step_factor = static_cast<uint64_t>(n);
      return {};
    case 'n':
      if (!parse_int(value, 1, 1ll << 30, n)) return bad("expected an integer >= 1");
      o.iters = static_cast<int>(n);
      return {};
    case 'w':
      if (!parse_int(value, 0, 1ll << 30, n)) return bad("expected an integer >= 0");
      o.warmup_iters = static_cast<int>(n);
      return {};
    case 'c':
      if (!parse_int(value, 0, 1000, n)) return bad("expected 0, 1 or a small check count");
      o.check = static_cast<int>(n);
      return {};
    case 'd':
      if (value == "all") {
        o.types = all_datatypes();
      } else if (auto t = strata::parse_datatype(value); t && supported_datatype(*t)) {
        o.types = {*t};
      } else {
        static const std::string expected = [] {
          std::vector<const char*> names;
          for (int i = 0; i < strata::kNumDataTypes; ++i)
            if (supported_datatype(static_cast<DataType>(i))) names.push_back(strata::name(static_cast<DataType>(i)));
          return "expected " + listed(names) + " or all";
        }();
        return bad(expected.c_str());
      }
      return {};
    case 'o':
      if (value == "all") {
        o.ops = all_reduce_ops();
      } else if (auto op = strata::parse_reduce_op(value)) {
        o.ops = {*op};
      } else {
        static const std::string expected = "expected " + listed(strata::kReduceOpNames) + " or all";
        return bad(expected.c_str());
      }
      return {};
    case 'r':
      if (value == "all") {
        o.root = -1;
        return {};
      }
      if (!parse_int(value, -1, 1 << 30, n)) return bad("expected a rank >= 0, or -1/all for every root");
      o.root = static_cast<int>(n);
      return {};
    case 'a':
      if (!parse_int(value, 0, 3, n)) return bad("expected 0=rank0 1=avg 2=min 3=max");
      o.average = static_cast<Average>(n);
      return {};
    case 'z':
      if (!parse_int(value, 0, 1, n)) return bad("expected 0 or 1");
      o.blocking = n != 0;
      return {};
    case 'C':
      if (!parse_int(value, 0, 1, n)) return bad("expected 0 or 1");
      o.report_cputime = n != 0;
      return {};
    case 'I':
      if (!parse_int(value, 0, 1, n)) return bad("expected 0 or 1");
      o.in_place = n != 0;
      return {};
    case 't':
      if (!parse_int(value, 1, 1024, n)) return bad("expected a thread count from 1 to 1024");
      o.threads = static_cast<int>(n);
      return {};
    case 'g':
    case 'm':
      if (!parse_int(value, 1, 1, n)) return bad("only 1 is supported: one rank per process");
      return {};
    case 'p':
    case 'y':
      if (!parse_int(value, 0, 1, n)) return bad("expected 0 or 1 (accepted and ignored)");
      return {};
    case 'G':
      if (!parse_int(value, 0, 0, n)) return bad("CUDA graphs do not apply; only 0 is accepted");
      return {};
    case 'J':
      if (value.empty()) return bad("expected a file name");
      o.json_path = value;
      return {};
  }
  return std::string("unknown option -") + flag;
}

}  // namespace

const std::vector<DataType>& all_datatypes() {
  static const std::vector<DataType> v = {DataType::int8,    DataType::uint8,   DataType::int32,   DataType::uint32,
                                          DataType::int64,   DataType::uint64,  DataType::float16, DataType::float32,
                                          DataType::float64, DataType::bfloat16};
  return v;
}

bool supported_datatype(DataType t) { return strata::is_valid(t); }

const std::vector<ReduceOp>& all_reduce_ops() {
  static const std::vector<ReduceOp> v = [] {
    std::vector<ReduceOp> out;
    for (int i = 0; i < strata::kNumReduceOps; ++i) out.push_back(static_cast<ReduceOp>(i));
    return out;
  }();
  return v;
}

std::optional<uint64_t> parse_size(std::string_view s) {
  if (s.empty()) return std::nullopt;
  std::string str(s);
  if (!(str[0] >= '0' && str[0] <= '9') && str[0] != '.') return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(str.c_str(), &end);
  if (errno != 0 || end == str.c_str() || !std::isfinite(v) || v < 0) return std::nullopt;
  std::string_view rest(end);
  double unit = 1;
  if (!rest.empty()) {
    switch (rest[0]) {
      case 'k': case 'K': unit = 1024.0; break;
      case 'm': case 'M': unit = 1024.0 * 1024; break;
      case 'g': case 'G': unit = 1024.0 * 1024 * 1024; break;
      case 'b': case 'B': break;
      default: return std::nullopt;
    }
    if (rest[0] != 'b' && rest[0] != 'B') rest.remove_prefix(1);
    if (rest == "iB" || rest == "ib" || rest == "B" || rest == "b") rest = {};
    if (!rest.empty()) return std::nullopt;
  }
  const double bytes = v * unit;
  if (bytes >= 18446744073709551616.0) return std::nullopt;  // 2^64
  return static_cast<uint64_t>(bytes);
}

ParseResult parse_options(const std::vector<std::string>& args) {
  ParseResult r;
  Options& o = r.options;
  // The collective is the first word: nccl-tests has one binary per collective.
  size_t first = 1;
  if (first < args.size() && !args[first].empty() && args[first][0] != '-') {
    auto c = parse_coll(args[first]);
    if (!c) {
      r.error = "unknown collective '" + args[first] + "' (expected " + coll_names(", ") + ")";
      return r;
    }
    o.coll = *c;
    ++first;
  } else {
    bool wants_help = false;
    for (size_t j = first; j < args.size(); ++j) wants_help |= args[j] == "-h" || args[j] == "--help";
    if (wants_help) {
      o.help = true;
      return r;
    }
    r.error = "missing the collective: the first word must be one of " + coll_names(", ");
    return r;
  }

  // CLI11 splits the flags (-b 8, -b8, --minbytes 8, --minbytes=8) and keeps what it does
  // not know in remaining(); each value is checked as it is parsed, so the first problem
  // on the line is the one reported, in our words.
  CLI::App app;
  app.set_help_flag();
  app.allow_extras();
  app.add_flag_callback("-h,--help", [] { throw HelpRequested{}; })->trigger_on_parse()->disable_flag_override();
  for (const Flag& f : flags()) {
    const std::string names = std::string("-") + f.short_name + ",--" + f.long_name;
    app.add_option_function<std::string>(names, [&o, flag = f.short_name](const std::string& value) {
         if (std::string error = apply(o, flag, value); !error.empty()) throw BadValue{error};
       })->trigger_on_parse();
  }
  std::vector<std::string> rest(args.rbegin(), args.rend() - static_cast<std::ptrdiff_t>(first));
  const size_t given = rest.size();
  // The argument CLI11 was at when it stopped: the last one it consumed from `rest`.
  auto current = [&]() -> const std::string& { return args[first + given - rest.size() - 1]; };
  try {
    app.parse(rest);  // consumes the reversed `rest` from its back
  } catch (const HelpRequested&) {
    o.help = current() == "-h" || current() == "--help";  // not -hx: flags do not bundle
    if (!o.help) r.error = "unknown option '" + current() + "'";
  } catch (const BadValue& e) {
    r.error = e.message;
  } catch (const CLI::ArgumentMismatch&) {
    // A flag given a value (--help=1), or a value missing at the end of the line.
    const std::string& a = current();
    const CLI::Option* opt = app.get_option_no_throw(a.substr(0, a.find('=')));
    if (opt && opt->get_expected_max() > 0)
      r.error = "option -" + opt->get_snames()[0] + "/--" + opt->get_lnames()[0] + " needs a value";
    else
      r.error = "unknown option '" + a + "'";
  } catch (const CLI::ParseError& e) {
    r.error = e.what();
  }
  // What CLI11 did not know came before anything reported above.
  if (const std::vector<std::string> unknown = app.remaining(); !unknown.empty()) {
    const std::string& a = unknown.front();
    r.error = (a.size() >= 2 && a[0] == '-' ? "unknown option '" : "unexpected argument '") + a + "'";
    o.help = false;
  }
  if (!r.error.empty() || o.help) return r;

  if (o.min_bytes > o.max_bytes) {
    r.error = "invalid sizes for 'minbytes' and 'maxbytes': " + std::to_string(o.min_bytes) + " > " +
              std::to_string(o.max_bytes);
  } else if (o.step_factor <= 1 && o.step_bytes == 0 && o.min_bytes < o.max_bytes) {
    r.error = "stepbytes (-i) must be > 0 when stepfactor (-f) is 1";
  }
  return r;
}

std::string usage(const std::string& program) {
  return "USAGE: " + program +
         " <collective> [options]\n"
         "  collective: " + coll_names(" ") + "\n"
         "\t[-b,--minbytes <min size in bytes>] (K/M/G suffixes: powers of 1024; default 32M)\n"
         "\t[-e,--maxbytes <max size in bytes>] (default 32M)\n"
         "\t[-i,--stepbytes <increment size>] (default 1M; used when -f is 1)\n"
         "\t[-f,--stepfactor <increment factor>] (default 1)\n"
         "\t[-n,--iters <iteration count>] (default 20)\n"
         "\t[-w,--warmup_iters <warmup iteration count>] (default 5)\n"
         "\t[-c,--check <0/1: check iteration count>] (default 1)\n"
         "\t[-o,--op <sum/prod/min/max/avg/all>] (default sum)\n"
         "\t[-d,--datatype <int8/uint8/int32/uint32/int64/uint64/half/bfloat16/float/double/f8e4m3/f8e5m2/all>] (default float)\n"
         "\t[-r,--root <root>] (-1 or all: every rank in turn; default 0)\n"
         "\t[-z,--blocking <0/1>] (barrier after each operation; default 0)\n"
         "\t[-I,--in_place <0/1>] (0: skip the in-place half of each row; default 1; not in nccl-tests)\n"
         "\t[-a,--average <0/1/2/3> report average iteration time <0=RANK0/1=AVG/2=MIN/3=MAX>] (default 1)\n"
         "\t[-C,--report_cputime <0/1>] (label only: host time is what is measured)\n"
         "\t[-J,--json <file>] (rank 0 writes the results as JSON)\n"
         "\t[-t,--nthreads <n>] (ranks as threads of each process, each with its communicator: the job has\n"
         "\t processes x n ranks, numbered process by process; default 1; where the tool has threads)\n"
         "\t[-g/-m 1, -p/-y 0|1, -G 0] accepted for nccl-tests compatibility\n"
         "\t[-h,--help]\n";
}

}  // namespace perf
