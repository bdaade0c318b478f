#include "options.hpp"

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string_view>
#include <vector>

#include "errors.hpp"
#include "pipeline_schedule.hpp"
#include "rank_grid.hpp"

namespace strata::train {
namespace {

long long parse_int(std::string_view flag, const std::string& v, long long lo, long long hi) {
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || x < lo || x > hi)
    throw TrainError("--" + std::string(flag) + " needs a whole number from " + std::to_string(lo) + " to " +
                     std::to_string(hi) + ", got '" + v + "'");
  return x;
}

std::string num(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", x);
  return b;
}

double parse_real(std::string_view flag, const std::string& v, double lo, double hi) {
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !std::isfinite(x) || x < lo || x > hi)
    throw TrainError("--" + std::string(flag) + " needs a number from " + num(lo) + " to " + num(hi) + ", got '" + v +
                     "'");
  return x;
}

struct Flag {
  std::string_view name;
  std::string_view value;  // empty: takes no value
  std::string_view help;
  std::function<void(Options&, const std::string&)> apply;
};

// Flag builders: the table below then reads one flag per line.
Flag whole(std::string_view name, std::string_view help, int Options::*field, long long lo, long long hi) {
  return {name, "N", help,
          [=](Options& o, const std::string& v) { o.*field = static_cast<int>(parse_int(name, v, lo, hi)); }};
}

Flag shape(std::string_view name, std::string_view help, int ModelConfig::*field, long long hi) {
  return {name, "N", help,
          [=](Options& o, const std::string& v) { o.model.*field = static_cast<int>(parse_int(name, v, 1, hi)); }};
}

Flag real(std::string_view name, std::string_view help, float Options::*field, double hi) {
  return {name, "X", help,
          [=](Options& o, const std::string& v) { o.*field = static_cast<float>(parse_real(name, v, 0, hi)); }};
}

Flag text(std::string_view name, std::string_view help, std::string Options::*field) {
  return {name, "DIR", help, [=](Options& o, const std::string& v) { o.*field = v; }};
}

// DiLoCo's flags fill the library's OuterSyncConfig (whose defaults they keep); they
// mean something only with --diloco-h.
Flag outer(std::string_view name, std::string_view value, std::string_view help,
           std::function<void(strata::OuterSyncConfig&, const std::string&)> set) {
  return {name, value, help, [=](Options& o, const std::string& v) {
            set(o.outer, v);
            if (o.diloco_flag.empty()) o.diloco_flag = "--" + std::string(name);
          }};
}

const std::vector<Flag>& flags() {
  constexpr long long kBig = 1'000'000'000;
  static const std::vector<Flag> table = {
      {"data", "FILES",
       "text file, or llm.c uint16 token shards (.bin), comma-separated, to train on "
       "(default data/tinyshakespeare.txt); the last tenth is the validation split unless --val-data",
       [](Options& o, const std::string& v) { o.data = v; }},
      {"val-data", "FILES",
       "the validation split's files (text or token shards, comma-separated) instead of the "
       "last tenth of --data",
       [](Options& o, const std::string& v) { o.val_data = v; }},
      shape("vocab", "vocabulary size: at least the largest token + 1 (default 256, bytes; GPT-2's is 50257)",
            &ModelConfig::vocab, 1 << 16),
      shape("layers", "transformer blocks (default 4)", &ModelConfig::layers, 1024),
      shape("heads", "attention heads; must divide --dim (default 4)", &ModelConfig::heads, 1024),
      shape("dim", "model width (default 128)", &ModelConfig::dim, 65536),
      shape("ctx", "context length in bytes (default 64)", &ModelConfig::ctx, 65536),
      whole("batch", "global batch in sequences, split over the dp ranks (default 16)", &Options::batch, 1, kBig),
      whole("steps", "optimizer steps; the learning-rate schedule ends here (default 2000)", &Options::steps, 1, kBig),
      whole("dp", "data-parallel ranks; tp x pp x dp must equal the job's rank count (default: ranks / (tp x pp))",
            &Options::dp, 1, 65536),
      {"zero", "0|1|2|3",
       "0: all-reduce; 1: shard optimizer state; 2: also shard gradients; 3: also shard parameters, gathered "
       "per layer as used (default 0)",
       whole("zero", "", &Options::zero, 0, 3).apply},
      whole("prefetch",
            "--zero 3: layers whose all-gather is issued ahead of their use (default 1; 0: gathered "
            "when used)",
            &Options::prefetch, 0, 1024),
      {"recompute", "none|block",
       "block: keep only each transformer block's input and compute its forward again in backward "
       "(default none)",
       [](Options& o, const std::string& v) {
         if (v != "none" && v != "block") throw TrainError("--recompute needs none or block, got '" + v + "'");
         o.recompute = v == "block";
       }},
      whole("tp", "tensor-parallel ranks (Megatron: heads, MLP, vocabulary) (default 1)", &Options::tp, 1, 65536),
      whole("pp", "pipeline stages (default 1)", &Options::pp, 1, 65536),
      whole("microbatches", "microbatches per step (default 1, or --pp with a pipeline)", &Options::microbatches, 1,
            kBig),
      {"schedule", "NAME", "pipeline schedule: gpipe, 1f1b or interleaved (default 1f1b)",
       [](Options& o, const std::string& v) {
         if (!parse_schedule(v)) throw TrainError("--schedule needs gpipe, 1f1b or interleaved, got '" + v + "'");
         o.schedule = v;
       }},
      whole("virtual-stages", "chunks per stage for --schedule interleaved (default 2)", &Options::virtual_stages, 1,
            1024),
      {"sequence-parallel", "", "split LayerNorm and the residual stream over the --tp ranks",
       [](Options& o, const std::string&) { o.sequence_parallel = true; }},
      {"layout", "ORDER", "rank order of tp, pp, dp, innermost first (default tp,pp,dp: tp inside a node)",
       [](Options& o, const std::string& v) {
         parse_grid_order(v);
         o.layout = v;
       }},
      real("lr", "peak learning rate (default 1e-3)", &Options::lr, 10),
      whole("warmup", "linear warmup steps before the cosine decay (default 100)", &Options::warmup, 0, kBig),
      real("wd", "AdamW weight decay on matrices and embeddings (default 0.1)", &Options::wd, 10),
      real("clip", "clip the global gradient norm to X; 0 turns clipping off (default 1.0)", &Options::clip, 1e9),
      {"seed", "N", "seed for initialisation, data order and sampling (default 1337)",
       [](Options& o, const std::string& v) { o.seed = static_cast<uint64_t>(parse_int("seed", v, 0, 1LL << 62)); }},
      whole("eval-every", "validation loss every N steps; 0: only at the end (default 100)", &Options::eval_every, 0,
            kBig),
      whole("eval-batches", "global batches per validation; 0: no validation (default 8)", &Options::eval_batches, 0,
            kBig),
      whole("sample-len", "bytes of text to sample at the end; 0: none (default 256)", &Options::sample_len, 0, kBig),
      text("save", "write DIR/checkpoint.bin at the end (and see --save-every, --stop-at)", &Options::save),
      text("resume", "continue from DIR/checkpoint.bin", &Options::resume),
      whole("save-every", "also checkpoint every N steps (needs --save)", &Options::save_every, 0, kBig),
      whole("stop-at", "stop after step N (checkpoint with --save); the schedule follows --steps", &Options::stop_at, 1,
            kBig),
      {"bucket-mb", "X", "gradient bucket size in MB for overlapped reduction (default 0.25)",
       [](Options& o, const std::string& v) { o.bucket_mb = parse_real("bucket-mb", v, 1e-6, 1e6); }},
      whole("threads", "BLAS threads per rank (default: cores / ranks)", &Options::threads, 1, 1024),
      whole("log-every", "print a progress line every N steps (default 1)", &Options::log_every, 1, kBig),
      whole("diloco-h", "DiLoCo: inner steps between outer syncs across islands; 0: off (default 0)",
            &Options::diloco_h, 0, kBig),
      outer("islands", "K", "DiLoCo islands: the hierarchy's outermost groups (strata-run --hosts K)",
            [](strata::OuterSyncConfig& c, const std::string& v) {
              c.islands = static_cast<int>(parse_int("islands", v, 1, 65536));
            }),
      outer("outer-lr", "X", "DiLoCo outer learning rate (default 0.7)",
            [](strata::OuterSyncConfig& c, const std::string& v) {
              c.lr = static_cast<float>(parse_real("outer-lr", v, 0, 10));
            }),
      outer("outer-momentum", "X", "DiLoCo outer Nesterov momentum (default 0.9)",
            [](strata::OuterSyncConfig& c, const std::string& v) {
              c.momentum = static_cast<float>(parse_real("outer-momentum", v, 0, 1));
            }),
      outer("outer-dtype", "fp32|bf16|int8|fp4", "DiLoCo: format between islands (default fp32)",
            [](strata::OuterSyncConfig& c, const std::string& v) {
              auto f = strata::parse_wire_format(v);
              if (!f) throw TrainError("--outer-dtype needs fp32, bf16, int8 or fp4, got '" + v + "'");
              c.format = *f;
            }),
      outer("fragments", "F", "streaming DiLoCo: fragments of strided layers synced in turn (default 1)",
            [](strata::OuterSyncConfig& c, const std::string& v) {
              c.fragments = static_cast<int>(parse_int("fragments", v, 1, 1 << 20));
            }),
      outer("overlap", "N", "streaming DiLoCo: inner steps an exchange runs before it is applied (default 0)",
            [](strata::OuterSyncConfig& c, const std::string& v) {
              c.overlap = static_cast<int>(parse_int("overlap", v, 0, kBig));
            }),
      outer("mix", "X", "streaming DiLoCo: weight of the local values when applied (default 0)",
            [](strata::OuterSyncConfig& c, const std::string& v) {
              c.mix = static_cast<float>(parse_real("mix", v, 0, 1));
            }),
      {"on-failure", "WHAT",
       "stop, or shrink: when a rank dies, the others go on with the same global batch, from their state "
       "(data parallel, --zero 0) or from the last checkpoint on the largest layout that fits them (--tp, --pp, "
       "--zero 1/2/3; needs --save); or continue (DiLoCo): an island that loses a rank stops, the others go on "
       "(default stop)",
       [](Options& o, const std::string& v) {
         if (v != "stop" && v != "shrink" && v != "continue")
           throw TrainError("--on-failure needs stop, shrink or continue, got '" + v + "'");
         o.on_failure = v;
       }},
      {"join", "",
       "DiLoCo, --on-failure continue: replace a rank of a lost island (start it with that rank's "
       "launcher variables); it joins the islands left at their next outer step and takes a live island's state",
       [](Options& o, const std::string&) { o.join = true; }},
      {"device", "NAME", "where the model computes: host, emulated or cuda (default: cuda where a GPU is, else host)",
       [](Options& o, const std::string& v) {
         if (v != "host" && v != "emulated" && v != "cuda")
           throw TrainError("--device needs host, emulated or cuda, got '" + v + "'");
         o.device = v;
       }},
      {"precision", "fp32|bf16", "fp32, or bf16 matrix products with fp32 master weights (--device cuda; default fp32)",
       [](Options& o, const std::string& v) {
         if (v != "fp32" && v != "bf16") throw TrainError("--precision needs fp32 or bf16, got '" + v + "'");
         o.precision = v;
       }},
      {"grad-dtype", "fp32|bf16",
       "the type the data-parallel gradient reductions are in: fp32, or bf16 (rounded for the reduction, "
       "averaged back in fp32; default fp32)",
       [](Options& o, const std::string& v) {
         if (v != "fp32" && v != "bf16") throw TrainError("--grad-dtype needs fp32 or bf16, got '" + v + "'");
         o.grad_dtype = v;
       }},
      {"help", "", "print this help", [](Options& o, const std::string&) { o.help = true; }},
  };
  return table;
}

// How a message names an argument CLI11 did not take: "--name" without "=value"; anything
// else is not an option of ours ("-x", "stray").
std::string not_ours(const std::string& arg) {
  if (arg.starts_with("--")) return "unknown option '" + arg.substr(0, arg.find('=')) + "'";
  return "unexpected argument '" + arg + "'";
}

// The DiLoCo flags against each other and the job (before it is joined); sets o.outer.every
// from --diloco-h.
void validate_diloco(Options& o, int world, bool launched) {
  if (o.diloco_h <= 0) {  // DiLoCo off (diloco.hpp's diloco_on)
    if (!o.diloco_flag.empty())
      throw TrainError(o.diloco_flag + " is a DiLoCo option: it needs --diloco-h H (inner steps between outer syncs)");
    return;
  }
  const int H = o.diloco_h, K = o.outer.islands;
  if (!launched) throw TrainError("--diloco-h needs a job of several ranks: start it with strata-run -n N");
  if (K == 0)
    throw TrainError("--diloco-h needs --islands K: the number of islands, the groups of the hierarchy's outermost "
                     "level (e.g. strata-run --hosts K)");
  if (world % K != 0)
    throw TrainError("--islands " + std::to_string(K) + " does not divide the " + std::to_string(world) +
                     " ranks into equal islands");
  if (o.dp % K != 0)
    throw TrainError("--islands " + std::to_string(K) + " does not divide --dp " + std::to_string(o.dp) +
                     ": each island holds whole replicas of the --tp x --pp grid, dp/K of them");
  const int groups = o.model.layers + 2;
  if (o.outer.fragments > groups)
    throw TrainError("--fragments " + std::to_string(o.outer.fragments) + " but the model has " +
                     std::to_string(groups) + " layer groups (embeddings, " + std::to_string(o.model.layers) +
                     " blocks, final LayerNorm)");
  if (o.outer.fragments > H)
    throw TrainError("--fragments " + std::to_string(o.outer.fragments) + " is more than --diloco-h " +
                     std::to_string(H) + ": at most one fragment starts per step");
  if (o.outer.overlap >= H)
    throw TrainError("--overlap " + std::to_string(o.outer.overlap) + " must be below --diloco-h " + std::to_string(H) +
                     ": a fragment is applied before its next sync");
  o.outer.every = H;
}

// Puts the default device in o.device when none was given, and refuses what the chosen
// device cannot do yet.
void validate_device(Options& o, int world, const std::function<std::string()>& default_device) {
  if (o.device.empty()) o.device = default_device();
  if (o.precision == "bf16" && o.device != "cuda")
    throw TrainError("--precision bf16 needs --device cuda (its products run on bf16 tensor cores); --device " +
                     o.device + " computes in fp32");
  // The groups call the communicator's stream forms on device buffers (group.hpp); what
  // has not been run on a device with several ranks is refused by name.
  if (o.device != "host" && world > 1 && o.on_failure != "stop")
    throw TrainError("--device " + o.device + " with --on-failure " + o.on_failure +
                     ": going on after a failure is not implemented on a device (its recovery moves host "
                     "buffers); use --device host, or --on-failure stop");
}
}  // namespace

Options parse_options(int argc, const char* const* argv) {
  Options o;
  std::vector<std::string> rest;  // reversed, as CLI11 consumes it (from the back)
  for (int a = argc - 1; a >= 1; --a) rest.emplace_back(argv[a]);
  const size_t given = rest.size();
  // The last argument CLI11 consumed.
  auto current = [&] { return std::string(argv[given - rest.size()]); };

  // CLI11 splits the line (--name value, --name=value); each value is checked as it is
  // parsed (TrainError), and what CLI11 does not know is kept in remaining().
  CLI::App app;
  app.set_help_flag();
  app.allow_extras();
  for (const Flag& f : flags()) {
    const std::string names = (f.name == "help" ? "-h,--" : "--") + std::string(f.name);
    if (f.value.empty()) {
      // A flag stands alone: not "-hx", not "--help=".
      auto checked = [&o, &f, &current, names] {
        const std::string arg = current();
        if (arg.find('=') != std::string::npos)
          throw TrainError("option '" + arg.substr(0, arg.find('=')) + "' takes no value");
        if (("," + names + ",").find("," + arg + ",") == std::string::npos) throw TrainError(not_ours(arg));
        f.apply(o, "");
      };
      app.add_flag_callback(names, checked)->disable_flag_override()->trigger_on_parse();
    } else {
      app.add_option_function<std::string>(names, [&o, &f](const std::string& v) { f.apply(o, v); })
          ->trigger_on_parse();
    }
  }
  std::string error;
  try {
    app.parse(rest);
  } catch (const TrainError& e) {
    error = e.what();
  } catch (const CLI::ArgumentMismatch&) {
    // A flag given a value, or a value missing at the end of the line.
    const std::string arg = current();
    const std::string name = arg.substr(0, arg.find('='));
    error = "option '" + name + "' takes no value";
    for (const Flag& f : flags())
      if ("--" + std::string(f.name) == name && !f.value.empty())
        error = "option '" + name + "' needs a value (" + std::string(f.value) + ")";
  } catch (const CLI::ParseError& e) {
    error = e.what();
  }
  // What CLI11 did not know came before anything reported above.
  if (const std::vector<std::string> left = app.remaining(); !left.empty()) throw TrainError(not_ours(left.front()));
  if (!error.empty()) throw TrainError(error);
  return o;
}

void validate_options(Options& o, int world, bool launched, const std::function<std::string()>& default_device) {
  const std::string n = std::to_string(world);
  const int mp = o.tp * o.pp;
  const std::string grid = "--tp " + std::to_string(o.tp) + " x --pp " + std::to_string(o.pp);
  if (o.dp == 0) {
    if (world % mp != 0)
      throw TrainError(grid + " = " + std::to_string(mp) + " does not divide the job's " + n + " ranks");
    o.dp = world / mp;
  }
  const int need = mp * o.dp;
  const std::string asked = mp > 1 ? grid + " x --dp " + std::to_string(o.dp) + " = " + std::to_string(need) + " ranks"
                                   : "--dp " + std::to_string(o.dp);
  if (need != world) {
    if (!launched)
      throw TrainError(asked + " needs that many ranks: start it with strata-run -n " + std::to_string(need) +
                       " (no STRATA_RANK here, so this is one process)");
    throw TrainError(asked + " but the job has " + n + " ranks; start it with strata-run -n " + std::to_string(need));
  }
  if (o.batch % o.dp != 0)
    throw TrainError("--batch " + std::to_string(o.batch) + " does not divide evenly over " + std::to_string(o.dp) +
                     " data-parallel ranks; use a multiple of " + std::to_string(o.dp));
  if (o.model.dim % o.model.heads != 0)
    throw TrainError("--heads " + std::to_string(o.model.heads) + " does not divide --dim " +
                     std::to_string(o.model.dim));
  if (o.model.heads % o.tp != 0)
    throw TrainError("--tp " + std::to_string(o.tp) + " does not divide --heads " + std::to_string(o.model.heads) +
                     ": each tensor-parallel rank takes whole heads");
  if (o.model.vocab % o.tp != 0)
    throw TrainError("--tp " + std::to_string(o.tp) + " does not divide the vocabulary of " +
                     std::to_string(o.model.vocab));
  const Schedule schedule = *parse_schedule(o.schedule);
  const bool interleaved = schedule == Schedule::interleaved;
  if (o.virtual_stages == 0) o.virtual_stages = interleaved ? 2 : 1;
  if (interleaved && (o.pp < 2 || o.virtual_stages < 2))
    throw TrainError("--schedule interleaved needs --pp 2 or more and --virtual-stages 2 or more");
  if (!interleaved && o.virtual_stages != 1)
    throw TrainError("--virtual-stages " + std::to_string(o.virtual_stages) + " needs --schedule interleaved");
  const int stages = o.pp * o.virtual_stages;
  if (o.model.layers < stages)
    throw TrainError("--layers " + std::to_string(o.model.layers) + " is fewer than the " + std::to_string(stages) +
                     " pipeline stages (--pp " + std::to_string(o.pp) + " x " + std::to_string(o.virtual_stages) +
                     " virtual stages): each needs a layer");
  if (o.microbatches == 0) o.microbatches = o.pp;
  const int per_dp = o.batch / o.dp;
  if (per_dp % o.microbatches != 0)
    throw TrainError("--microbatches " + std::to_string(o.microbatches) + " does not divide the " +
                     std::to_string(per_dp) + " sequences of each data-parallel rank (--batch " +
                     std::to_string(o.batch) + " / --dp " + std::to_string(o.dp) + ")");
  if (interleaved && o.microbatches % o.pp != 0)
    throw TrainError("--schedule interleaved runs microbatches in groups of --pp " + std::to_string(o.pp) +
                     ": --microbatches " + std::to_string(o.microbatches) + " is not a multiple of it");
  if (o.sequence_parallel) {
    if (o.tp < 2) throw TrainError("--sequence-parallel needs --tp 2 or more");
    const int rows = per_dp / o.microbatches * o.model.ctx;
    if (rows % o.tp != 0)
      throw TrainError("--sequence-parallel: a microbatch's " + std::to_string(rows) +
                       " token rows do not divide over --tp " + std::to_string(o.tp));
  }
  if (o.prefetch >= 0 && o.zero != 3) throw TrainError("--prefetch is for --zero 3 (layers gathered ahead)");
  if (o.prefetch < 0 && o.zero == 3) o.prefetch = 1;
  if (o.on_failure == "shrink" && (o.tp * o.pp > 1 || o.zero > 0) && o.save.empty())
    throw TrainError("--on-failure shrink with " +
                     std::string(o.zero > 0 ? "--zero " + std::to_string(o.zero) : "--tp or --pp above 1") +
                     " goes on from the last checkpoint (a rank that dies takes state no other rank holds): it needs "
                     "--save DIR, and --save-every N to lose at most N steps");
  if (o.on_failure == "continue" && o.diloco_h == 0)
    throw TrainError("--on-failure continue is for DiLoCo's islands (--diloco-h, --islands): an island that loses a "
                     "rank stops and the others go on; without islands, --on-failure shrink");
  if (o.on_failure == "continue" && (o.outer.fragments > 1 || o.outer.overlap > 0 || o.outer.mix > 0))
    throw TrainError("--on-failure continue goes back to the last outer step, where every replica holds the global "
                     "model: it needs plain DiLoCo (--fragments 1, --overlap 0, --mix 0)");
  if (o.join && (o.on_failure != "continue" || !launched))
    throw TrainError("--join replaces a rank of an island that was lost: it needs --diloco-h with --on-failure "
                     "continue, and the launcher variables of the rank it replaces");
  if (o.join && !o.resume.empty()) throw TrainError("--join takes its state from a live island, not from --resume");
  if (o.on_failure == "shrink" && o.diloco_h > 0)
    throw TrainError("--on-failure shrink does not combine with --diloco-h: with islands, --on-failure continue lets "
                     "the islands that are whole go on without the one that lost a rank");
  if (o.save_every > 0 && o.save.empty()) throw TrainError("--save-every needs --save DIR");
  if (o.stop_at > o.steps)
    throw TrainError("--stop-at " + std::to_string(o.stop_at) + " is beyond --steps " + std::to_string(o.steps));
  validate_diloco(o, world, launched);
  validate_device(o, world, default_device);
}

std::string usage_text() {
  std::string s =
      "usage: strata-train [options]\n"
      "       strata-run -n N strata-train [options]     (N = tp x pp x dp ranks)\n"
      "\n"
      "Trains a GPT-2-style model on a text file (byte-level) or on token shards, and prints a line per step.\n"
      "\n";
  for (const auto& f : flags()) {
    std::string left = "  --" + std::string(f.name);
    if (!f.value.empty()) left += " " + std::string(f.value);
    if (left.size() < 22) left.resize(22, ' ');
    else left += "\n" + std::string(22, ' ');
    s += left + std::string(f.help) + "\n";
  }
  return s;
}

}  // namespace strata::train
