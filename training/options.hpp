// strata-train's command line.
#pragma once

#include <cstdint>
#include <functional>
#include <strata/outer_sync.hpp>
#include <string>

#include "layout.hpp"

namespace strata::train {

struct Options {
  // Text files (bytes are tokens) or llm.c token shards (data.hpp), comma-separated; the
  // validation split: the last tenth of them, or the files of val_data.
  std::string data = "data/tinyshakespeare.txt";
  std::string val_data;
  ModelConfig model;
  int batch = 16;  // global, in sequences; split over the dp ranks
  int steps = 2000;
  int dp = 0;  // 0: the job's rank count / (tp * pp)
  int zero = 0;
  int prefetch = -1;       // ZeRO-3: layer groups gathered ahead; -1: not given (1)
  bool recompute = false;  // --recompute block
  // Model parallelism (training/rank_grid.hpp, tensor_parallel.hpp, pipeline_schedule.hpp).
  int tp = 1, pp = 1;
  int microbatches = 0;  // 0: 1, or pp with a pipeline
  std::string schedule = "1f1b";
  int virtual_stages = 0;  // 0: 2 for the interleaved schedule, else 1
  bool sequence_parallel = false;
  std::string layout;  // innermost first, e.g. "tp,pp,dp"; empty: that default
  float lr = 1e-3f;
  int warmup = 100;
  float wd = 0.1f;
  float clip = 1.0f;
  uint64_t seed = 1337;
  int eval_every = 100;
  int eval_batches = 8;
  int sample_len = 256;
  std::string save, resume;
  int save_every = 0;
  int stop_at = 0;  // stop after this step (the schedule still runs to --steps)
  double bucket_mb = 0.25;
  int threads = 0;  // 0: cores / local ranks
  int log_every = 1;
  // DiLoCo (training/diloco.hpp): on when diloco_h > 0; `outer` holds the rest of its flags.
  int diloco_h = 0;
  strata::OuterSyncConfig outer;
  std::string diloco_flag;  // the first DiLoCo flag given, for "needs --diloco-h"
  // "stop", or "shrink": go on without a rank that failed (training/relayout.hpp)
  std::string on_failure = "stop";
  // DiLoCo with --on-failure continue: this process replaces a rank of a lost island
  // (training/island_heal.cpp).
  bool join = false;
  // Where the model computes (training/device/choose.hpp): host, emulated or cuda; empty
  // until validate_options puts the default there. precision: fp32 or bf16 (cuda).
  std::string device, precision = "fp32";
  // What the data-parallel gradient reductions are in: fp32, or bf16 (grad_sync.hpp).
  std::string grad_dtype = "fp32";
  bool help = false;
};

// Throws TrainError for an unknown flag or a malformed value.
Options parse_options(int argc, const char* const* argv);
// Checks that the options make sense together for a job of `world` ranks (`launched`: by a
// launcher, not as one process), DiLoCo's and the device's included, and fills in what
// depends on them. default_device: what --device is when not given (device/choose.hpp's
// default_device()), asked only then.
void validate_options(Options& o, int world, bool launched, const std::function<std::string()>& default_device);
std::string usage_text();

}  // namespace strata::train
