// One rank of an outer-synchronisation test job (run under strata-run by
// test_outer_sync.cpp). It plays a training run without a model: every "inner step" adds
// an island-specific perturbation to the parameters (the same on every rank of an island,
// as data parallel inside an island would), then calls OuterSync::step() — or, with
// --manual, sync() every H steps. It records, per rank, the parameters before and after
// each outer call, the global parameters at the end and the byte counter, for the test
// to compare with its references.
//
//   outer_sync_worker --out DIR [--n N] [--steps S] [--lr X] [--momentum X] [--nesterov 0|1]
//       [--formats fp32,bf16,...] [--every H] [--fragments F] [--overlap T] [--mix A]
//       [--islands K] [--segments a,b,...] [--manual] [--zero-start] [--c-api]
//       [--save-at K] [--load DIR] [--bad-rank R] [--die-rank R --die-at T]
//
// File DIR/trace_<format>_r<rank>.bin: the initial parameters[n]; for each step run
// (1..S, or save_at+1..S with --load): before[n], after[n]; then global[n]; then
// bytes_sent and exchanges as two float64.
#include <algorithm>
#include <csignal>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "strata.h"
#include "strata/outer_sync.hpp"
#include "strata/strata.hpp"

namespace {

struct Args {
  std::string out, load;
  size_t n = 1000;
  int steps = 6;
  strata::OuterSyncConfig cfg;
  std::vector<strata::WireFormat> formats{strata::WireFormat::fp32};
  std::vector<size_t> segments;
  bool manual = false, zero_start = false, c_api = false;
  int save_at = 0;
  int bad_rank = -1;
  int die_rank = -1, die_at = 0;  // that rank kills itself before the outer call of step T
};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", k.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (k == "--out") a.out = val();
    else if (k == "--load") a.load = val();
    else if (k == "--n") a.n = std::stoul(val());
    else if (k == "--steps") a.steps = std::stoi(val());
    else if (k == "--lr") a.cfg.lr = std::stof(val());
    else if (k == "--momentum") a.cfg.momentum = std::stof(val());
    else if (k == "--nesterov") a.cfg.nesterov = std::stoi(val()) != 0;
    else if (k == "--every") a.cfg.every = std::stoi(val());
    else if (k == "--fragments") a.cfg.fragments = std::stoi(val());
    else if (k == "--overlap") a.cfg.overlap = std::stoi(val());
    else if (k == "--mix") a.cfg.mix = std::stof(val());
    else if (k == "--islands") a.cfg.islands = std::stoi(val());
    else if (k == "--save-at") a.save_at = std::stoi(val());
    else if (k == "--bad-rank") a.bad_rank = std::stoi(val());
    else if (k == "--die-rank") a.die_rank = std::stoi(val());
    else if (k == "--die-at") a.die_at = std::stoi(val());
    else if (k == "--manual") a.manual = true;
    else if (k == "--zero-start") a.zero_start = true;
    else if (k == "--c-api") a.c_api = true;
    else if (k == "--formats") {
      a.formats.clear();
      for (auto& f : split_list(val())) a.formats.push_back(*strata::parse_wire_format(f));
    } else if (k == "--segments") {
      for (auto& s : split_list(val())) a.segments.push_back(std::stoul(s));
    } else {
      std::fprintf(stderr, "unknown argument %s\n", k.c_str());
      std::exit(2);
    }
  }
  return a;
}

// A value in [-1, 1) from (island, step, index): the same on every rank of an island.
float noise(int island, int step, size_t i) {
  uint64_t x = (static_cast<uint64_t>(island) << 48) ^ (static_cast<uint64_t>(step) << 24) ^ i;
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return static_cast<float>(x >> 40) / static_cast<float>(1 << 23) - 1.0f;
}

// The inner step: each island drifts its own way.
void inner_step(std::vector<float>& theta, int island, int step) {
  for (size_t i = 0; i < theta.size(); ++i) theta[i] += 0.01f * noise(island, step, i) + 0.002f * (island + 1);
}

void append(std::ofstream& f, const float* p, size_t n) { f.write(reinterpret_cast<const char*>(p), n * sizeof(float)); }

void write_file(const std::string& path, const std::vector<float>& v) {
  std::ofstream f(path, std::ios::binary);
  append(f, v.data(), v.size());
}

std::vector<float> read_file(const std::string& path, size_t n) {
  std::vector<float> v(n);
  std::ifstream f(path, std::ios::binary);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * sizeof(float)));
  if (!f) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    std::exit(2);
  }
  return v;
}

void check(strataResult_t r, const char* what) {
  if (r != strataSuccess) throw std::runtime_error(std::string(what) + ": " + strataGetLastError());
}

// The job's communicator, through the C++ or the C API.
struct Job {
  strata::Comm cpp;
  strataComm_t c = nullptr;
  int rank = 0, size = 1;
};

// The same calls through the C++ or the C API.
struct Outer {
  strata::OuterSync cpp;
  strataOuterSync_t c = nullptr;

  Outer(const Args& a, Job& job, float* params, const strata::OuterSyncConfig& cfg) {
    if (!job.c) {
      cpp = strata::OuterSync(job.cpp, params, a.n, cfg, a.segments);
      return;
    }
    strataOuterSyncConfig_t cc;
    check(strataOuterSyncConfigInit(&cc), "strataOuterSyncConfigInit");
    cc.lr = cfg.lr;
    cc.momentum = cfg.momentum;
    cc.nesterov = cfg.nesterov;
    cc.format = static_cast<strataWireFormat_t>(cfg.format);
    cc.islands = cfg.islands;
    cc.every = cfg.every;
    cc.fragments = cfg.fragments;
    cc.overlap = cfg.overlap;
    cc.mix = cfg.mix;
    check(strataOuterSyncCreate(job.c, params, a.n, &cc, a.segments.empty() ? nullptr : a.segments.data(),
                                a.segments.size(), &c),
          "strataOuterSyncCreate");
  }
  ~Outer() {
    if (c) strataOuterSyncDestroy(c);
  }
  void step() { c ? check(strataOuterSyncStep(c), "strataOuterSyncStep") : cpp.step(); }
  void sync() { c ? check(strataOuterSyncNow(c), "strataOuterSyncNow") : cpp.sync(); }
  void finish() { c ? check(strataOuterSyncFinish(c), "strataOuterSyncFinish") : cpp.finish(); }
  strata::OuterSyncStats stats() {
    if (!c) return cpp.stats();
    strataOuterSyncStats_t s;
    check(strataOuterSyncGetStats(c, &s), "strataOuterSyncGetStats");
    return {s.exchanges, s.bytes_sent, s.exposed_seconds};
  }
  void save(float* snap, float* mom) {
    long long steps = 0;
    c ? check(strataOuterSyncSaveState(c, snap, mom, &steps), "strataOuterSyncSaveState") : cpp.save_state(snap, mom);
  }
  void load(const float* snap, const float* mom, long long steps) {
    c ? check(strataOuterSyncLoadState(c, snap, mom, steps), "strataOuterSyncLoadState")
      : cpp.load_state(snap, mom, steps);
  }
};

void run(const Args& a, Job& job, strata::WireFormat format) {
  const int rank = job.rank;
  strata::OuterSyncConfig cfg = a.cfg;
  cfg.format = format;
  if (rank == a.bad_rank) cfg.every += 1;  // a rank that disagrees with the others
  std::vector<float> theta(a.n);
  for (size_t i = 0; i < a.n; ++i) theta[i] = a.zero_start ? 0.0f : 0.5f * std::sin(0.37f * static_cast<float>(i));
  Outer outer(a, job, theta.data(), cfg);
  // The C API does not tell the island: consecutive ranks, as --islands K makes them.
  const int isl = job.c ? rank / (job.size / cfg.islands) : outer.cpp.island();
  const std::string tag = std::string(strata::name(format)) + "_r" + std::to_string(rank);
  std::ofstream trace(a.out + "/trace_" + tag + ".bin", std::ios::binary);
  append(trace, theta.data(), a.n);
  int first = 1;
  if (!a.load.empty()) {
    std::vector<float> saved = read_file(a.load + "/theta_" + tag + ".bin", a.n);
    std::copy(saved.begin(), saved.end(), theta.begin());  // the object holds theta's address
    std::vector<float> snap = read_file(a.load + "/snapshot_" + tag + ".bin", a.n);
    std::vector<float> mom = read_file(a.load + "/momentum_" + tag + ".bin", a.n);
    outer.load(snap.data(), mom.data(), a.save_at);
    first = a.save_at + 1;
  }
  for (int t = first; t <= a.steps; ++t) {
    inner_step(theta, isl, t);
    append(trace, theta.data(), a.n);
    if (rank == a.die_rank && t == a.die_at) std::raise(SIGKILL);
    if (!a.manual) outer.step();
    else if (t % cfg.every == 0) outer.sync();
    append(trace, theta.data(), a.n);
    if (t == a.save_at && a.load.empty()) {
      std::vector<float> snap(a.n), mom(a.n);
      outer.save(snap.data(), mom.data());
      write_file(a.out + "/theta_" + tag + ".bin", theta);
      write_file(a.out + "/snapshot_" + tag + ".bin", snap);
      write_file(a.out + "/momentum_" + tag + ".bin", mom);
    }
  }
  outer.finish();
  std::vector<float> global(a.n), mom(a.n);
  outer.save(global.data(), mom.data());
  append(trace, global.data(), a.n);
  strata::OuterSyncStats st = outer.stats();
  double counters[2] = {static_cast<double>(st.bytes_sent), static_cast<double>(st.exchanges)};
  trace.write(reinterpret_cast<const char*>(counters), sizeof counters);
  std::printf("rank %d island %d %s: %llu exchanges, %llu bytes sent across islands\n", rank, isl,
              strata::name(format), static_cast<unsigned long long>(st.exchanges),
              static_cast<unsigned long long>(st.bytes_sent));
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse(argc, argv);
  try {
    Job job;
    if (a.c_api) {
      check(strataCommInitFromEnv(&job.c), "strataCommInitFromEnv");
      check(strataCommRank(job.c, &job.rank), "strataCommRank");
      check(strataCommCount(job.c, &job.size), "strataCommCount");
    } else {
      job.cpp = strata::Comm::init_from_env();
      job.rank = job.cpp.rank();
      job.size = job.cpp.size();
    }
    for (strata::WireFormat f : a.formats) run(a, job, f);
    if (job.c) check(strataCommDestroy(job.c), "strataCommDestroy");
    else job.cpp.destroy();
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
  return 0;
}
