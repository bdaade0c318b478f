// Whole outer-synchronisation jobs under strata-run (outer_sync_worker.cpp plays the
// training), checked against references the test computes itself: PyTorch's
// torch.optim.SGD for the outer step, the plain average of the replicas, the error bound
// of each wire format, the uninterrupted run for a resumed one, and the byte counts from
// the formats' sizes. Islands come from the hierarchy (STRATA_HIERARCHY=node:2: emulated
// nodes, over tcp between them) or from --islands K.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "tests/common/process.hpp"
#include "tests/failure/failure_job.hpp"

namespace {

struct Job {
  int ranks = 4;
  std::map<std::string, std::string> env{{"STRATA_HIERARCHY", "node:2"}};  // 2 islands of 2
  size_t n = 1000;
  int steps = 6;
  int first = 1;  // first step recorded (--load continues after --save-at)
  std::vector<std::string> args;
};

struct Trace {
  std::vector<float> theta0, before, after, global;  // before/after: [step][n]
  double bytes = 0, exchanges = 0;
  const float* at(const std::vector<float>& v, int step, size_t n, int first) const {
    return v.data() + static_cast<size_t>(step - first) * n;
  }
};

// A new directory for one job's traces; every one made is removed when the test exits.
std::string temp_dir() {
  struct Made {
    std::vector<std::string> dirs;
    ~Made() {
      for (const std::string& d : dirs) std::filesystem::remove_all(d);
    }
  };
  static Made made;
  char t[] = "/tmp/strata-outer-XXXXXX";
  if (!mkdtemp(t)) return "";
  made.dirs.push_back(t);
  return t;
}

strata_test::ProcResult run_job(const Job& j, const std::string& out) {
  std::vector<std::string> argv = {STRATA_RUN_PATH, "-n", std::to_string(j.ranks), "--", OUTER_SYNC_WORKER_PATH,
                                   "--out", out, "--n", std::to_string(j.n), "--steps", std::to_string(j.steps)};
  argv.insert(argv.end(), j.args.begin(), j.args.end());
  auto env = j.env;
  env["STRATA_TIMEOUT"] = "30";
  return strata_test::run_one(argv, env, 60);
}

Trace read_trace(const Job& j, const std::string& dir, const std::string& format, int rank) {
  Trace t;
  std::ifstream f(dir + "/trace_" + format + "_r" + std::to_string(rank) + ".bin", std::ios::binary);
  const size_t steps = static_cast<size_t>(j.steps - j.first + 1);
  auto get = [&](std::vector<float>& v, size_t count) {
    v.resize(count);
    f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(count * sizeof(float)));
  };
  get(t.theta0, j.n);
  std::vector<float> pairs;
  get(pairs, 2 * j.n * steps);
  for (size_t s = 0; s < steps; ++s) {
    t.before.insert(t.before.end(), pairs.begin() + 2 * s * j.n, pairs.begin() + (2 * s + 1) * j.n);
    t.after.insert(t.after.end(), pairs.begin() + (2 * s + 1) * j.n, pairs.begin() + (2 * s + 2) * j.n);
  }
  get(t.global, j.n);
  double c[2] = {-1, -1};
  f.read(reinterpret_cast<char*>(c), sizeof c);
  EXPECT_TRUE(f.good()) << "trace of rank " << rank << " (" << format << ") is short";
  t.bytes = c[0];
  t.exchanges = c[1];
  return t;
}

std::vector<Trace> run_and_read(const Job& j, const std::string& format, std::string* dir_out = nullptr) {
  std::string dir = temp_dir();
  strata_test::ProcResult r = run_job(j, dir);
  EXPECT_TRUE(r.exited && r.exit_code == 0) << r.describe() << "\n" << strata_test::tail(r.out);
  std::vector<Trace> out;
  if (!(r.exited && r.exit_code == 0)) return out;
  for (int rank = 0; rank < j.ranks; ++rank) out.push_back(read_trace(j, dir, format, rank));
  if (dir_out) *dir_out = dir;
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Every rank's parameters after every outer call, and the global parameters, bit for bit.
void expect_identical(const std::vector<Trace>& t, const std::string& what, bool live_too = true) {
  for (size_t r = 1; r < t.size(); ++r) {
    if (live_too) {
      EXPECT_TRUE(same_bits(t[0].after, t[r].after)) << what << ": rank " << r << " parameters differ from rank 0's";
    }
    EXPECT_TRUE(same_bits(t[0].global, t[r].global)) << what << ": rank " << r << " global parameters differ from rank 0's";
  }
}

// Bytes per kWireBlock = 64 elements on the wire, written out here independently of the
// library's table: fp32, bf16, int8 (a 4-byte scale + 64 bytes), fp4 (scale + 32 bytes).
size_t block_bytes(const std::string& f) {
  return f == "fp32" ? 256 : f == "bf16" ? 128 : f == "int8" ? 68 : 36;
}

// Bytes one rank sends across islands in one exchange of each fragment: the fragment is
// padded to a multiple of g·K·64, cut into g shares and each share into K pieces; a rank
// sends K−1 encoded pieces and gathers K−1 encoded means.
std::vector<double> exchange_bytes(const std::vector<size_t>& frag_real, int K, int g, const std::string& f) {
  std::vector<double> out;
  const size_t q = static_cast<size_t>(K * g) * 64;
  for (size_t real : frag_real) {
    size_t piece = (real + q - 1) / q * q / g / K;
    out.push_back(2.0 * (K - 1) * piece / 64 * block_bytes(f));
  }
  return out;
}

const char* kFormats[] = {"fp32", "bf16", "int8", "fp4"};

}  // namespace

// Sign of Δ and the outer step: PyTorch's SGD (Nesterov and heavy-ball) on the averaged
// pseudo-gradient, replayed from the islands' own parameters before each sync.
TEST(OuterSync, OuterStepMatchesPyTorch) {
  const std::string py = strata_test::find_torch_python();
  if (py.empty()) GTEST_SKIP() << "PyTorch not available (python3 -c 'import torch' fails; apt-get install python3-torch)";
  struct Case {
    Job job;
    std::string lr, momentum, nesterov;
    std::vector<int> island_ranks;
  };
  Case nesterov{{}, "0.7", "0.9", "1", {0, 2}};  // defaults; 2 islands of 2 ranks from the hierarchy
  nesterov.job.args = {"--every", "1", "--manual"};
  Case heavy{{}, "0.5", "0.8", "0", {0, 1, 2}};  // 3 islands of 1 rank
  heavy.job.ranks = 3;
  heavy.job.env = {};
  heavy.job.args = {"--islands", "3", "--lr", "0.5", "--momentum", "0.8", "--nesterov", "0", "--every", "1"};
  double worst = 0;
  size_t same = 0, total = 0;
  for (Case* c : {&nesterov, &heavy}) {
    std::string dir;
    std::vector<Trace> t = run_and_read(c->job, "fp32", &dir);
    ASSERT_EQ(t.size(), static_cast<size_t>(c->job.ranks));
    std::string cmd = py + " " OUTER_REFERENCE_PY " " + std::to_string(c->job.n) + " " + std::to_string(c->job.steps) +
                      " " + c->lr + " " + c->momentum + " " + c->nesterov + " " + dir + "/ref.bin";
    for (int r : c->island_ranks) cmd += " " + dir + "/trace_fp32_r" + std::to_string(r) + ".bin";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::vector<float> ref(c->job.n * c->job.steps);
    std::ifstream f(dir + "/ref.bin", std::ios::binary);
    f.read(reinterpret_cast<char*>(ref.data()), static_cast<std::streamsize>(ref.size() * sizeof(float)));
    ASSERT_TRUE(f.good()) << "no reference from " << cmd;
    // Same float32 operations in the same order, multiply-adds fused as PyTorch's AVX2
    // kernels fuse them: equal to the bit where PyTorch fuses too (counted); a few units
    // in the last place allowed for a PyTorch that does not.
    for (size_t i = 0; i < ref.size(); ++i) {
      double d = std::fabs(t[0].after[i] - ref[i]), tol = 1e-6 * std::fabs(ref[i]) + 1e-7;
      worst = std::max(worst, d / tol);
      same += std::memcmp(&t[0].after[i], &ref[i], sizeof(float)) == 0;
      total += 1;
      ASSERT_LE(d, tol) << "lr " << c->lr << " momentum " << c->momentum << " nesterov " << c->nesterov << ": step "
                        << i / c->job.n + 1 << " element " << i % c->job.n << ": " << t[0].after[i] << " vs torch "
                        << ref[i];
    }
    expect_identical(t, "torch case");
  }
  std::printf("outer step vs torch.optim.SGD (Nesterov lr 0.7 mom 0.9 on 2x2 ranks; heavy-ball lr 0.5 mom 0.8 on 3x1): "
              "%zu of %zu values bit-identical, worst |diff| = %.2f of the tolerance 1e-6|ref| + 1e-7\n", same, total,
              worst);
}

// H = 1, lr 1, momentum 0: after each step every replica holds the average of the
// islands' parameters (3 islands of 2 ranks).
TEST(OuterSync, H1Lr1Momentum0IsAveraging) {
  Job j;
  j.ranks = 6;
  j.args = {"--every", "1", "--lr", "1", "--momentum", "0"};
  std::vector<Trace> t = run_and_read(j, "fp32");
  ASSERT_EQ(t.size(), 6u);
  double worst = 0;
  for (int s = 1; s <= j.steps; ++s) {
    for (size_t i = 0; i < j.n; ++i) {
      double sum = 0, mag = 0;
      for (int isl = 0; isl < 3; ++isl) {
        float b = t[2 * isl].at(t[2 * isl].before, s, j.n, 1)[i];
        sum += b;
        mag = std::max(mag, std::fabs(static_cast<double>(b)));
      }
      const float* prev = s == 1 ? t[0].theta0.data() : t[0].at(t[0].after, s - 1, j.n, 1);
      mag = std::max(mag, std::fabs(static_cast<double>(prev[i])));
      // θ_old − mean(θ_old − θ_k) in float32: a few roundings of values of size `mag`.
      double d = std::fabs(t[0].at(t[0].after, s, j.n, 1)[i] - sum / 3);
      worst = std::max(worst, d / (8 * 1.2e-7 * mag + 1e-30));
      ASSERT_LE(d, 8 * 1.2e-7 * mag) << "step " << s << " element " << i;
    }
  }
  expect_identical(t, "averaging");
  std::printf("H=1 lr=1 momentum=0 vs the average of 3 islands: worst |diff| = %.2f of 8 ulp\n", worst);
}

// Every format, plain and streaming: after every outer step the elements it applied are
// bit-identical on every rank (with mix 0: the live parameters; with mix > 0 only the
// global ones, since each island keeps part of its own), ranks of one island always
// agree, and the bytes sent are the formats' sizes.
TEST(OuterSync, ReplicasBitIdenticalInEveryMode) {
  struct Mode {
    std::string name;
    int every, fragments, overlap;
    std::string mix;
    int steps;
  };
  const std::vector<Mode> modes = {
      {"plain H=2", 2, 1, 0, "0", 6},
      {"streaming H=4 F=3 tau=1", 4, 3, 1, "0", 12},
      {"streaming H=4 F=2 tau=2 mix=0.5", 4, 2, 2, "0.5", 12},
  };
  for (const Mode& m : modes) {
    Job j;
    j.steps = m.steps;
    // Ten segments of 100: segment s belongs to fragment s mod F.
    j.args = {"--every", std::to_string(m.every), "--fragments", std::to_string(m.fragments), "--overlap",
              std::to_string(m.overlap), "--mix", m.mix, "--segments", "100,100,100,100,100,100,100,100,100,100",
              "--formats", "fp32,bf16,int8,fp4"};
    std::string dir = temp_dir();
    strata_test::ProcResult r = run_job(j, dir);
    ASSERT_TRUE(r.exited && r.exit_code == 0) << m.name << "\n" << r.describe() << "\n" << strata_test::tail(r.out);
    // Fragment p is exchanged at (p+1)·H/F + k·H and applied τ steps later.
    std::vector<size_t> frag_real(static_cast<size_t>(m.fragments), 0);
    for (int s = 0; s < 10; ++s) frag_real[static_cast<size_t>(s % m.fragments)] += 100;
    auto applied_at = [&](int p, int t) {
      const int first = (p + 1) * m.every / m.fragments, x = t - m.overlap;
      return x >= first && (x - first) % m.every == 0;
    };
    for (const char* f : kFormats) {
      std::vector<Trace> t;
      for (int rank = 0; rank < j.ranks; ++rank) t.push_back(read_trace(j, dir, f, rank));
      int checked = 0;
      for (int step = 1; step <= m.steps; ++step) {
        for (int rank = 1; rank < j.ranks; ++rank) {
          const float* a = t[0].at(t[0].after, step, j.n, 1);
          const float* b = t[rank].at(t[rank].after, step, j.n, 1);
          const float* mate = t[rank % 2 ? rank - 1 : rank].at(t[rank % 2 ? rank - 1 : rank].after, step, j.n, 1);
          ASSERT_EQ(std::memcmp(b, mate, j.n * sizeof(float)), 0) << m.name << " " << f << " step " << step
                                                                    << ": ranks of one island differ";
          if (m.mix != "0") continue;
          for (int s = 0; s < 10; ++s) {
            if (!applied_at(s % m.fragments, step)) continue;
            ASSERT_EQ(std::memcmp(a + 100 * s, b + 100 * s, 100 * sizeof(float)), 0)
                << m.name << " " << f << " step " << step << ": rank " << rank << " differs from rank 0 in segment " << s;
            ++checked;
          }
        }
      }
      expect_identical(t, m.name + " " + f, false);
      EXPECT_TRUE(m.mix != "0" || checked > 0) << m.name;
      std::vector<double> per = exchange_bytes(frag_real, 2, 2, f);
      double bytes = 0, count = 0;
      for (int p = 0; p < m.fragments; ++p) {
        int n = 0;  // exchanges over the run, the last ones applied by finish()
        for (int step = 1; step <= m.steps; ++step) n += applied_at(p, step + m.overlap);
        bytes += per[static_cast<size_t>(p)] * n;
        count += n;
      }
      for (const Trace& x : t) {
        EXPECT_EQ(x.bytes, bytes) << m.name << " " << f;
        EXPECT_EQ(x.exchanges, count) << m.name << " " << f;
      }
      EXPECT_FALSE(same_bits(t[0].global, t[0].theta0)) << m.name << " " << f << ": the sync did nothing";
      std::printf("%s %s: %d ranks bit-identical where applied, %.0f bytes sent per rank across islands\n",
                  m.name.c_str(), f, j.ranks, bytes);
    }
  }
}

// One sync of zero-start parameters with lr 1, momentum 0 gives −Q(mean_k Q(Δ_k)) with
// Δ_k = −θ_k: within each format's bound of the plain average, the same on every rank.
TEST(OuterSync, CompressedAverageWithinFormatBound) {
  Job j;
  j.steps = 1;
  j.args = {"--zero-start", "--every", "1", "--lr", "1", "--momentum", "0", "--formats", "fp32,bf16,int8,fp4"};
  std::string dir = temp_dir();
  strata_test::ProcResult r = run_job(j, dir);
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe() << "\n" << strata_test::tail(r.out);
  for (const char* f : kFormats) {
    std::vector<Trace> t;
    for (int rank = 0; rank < j.ranks; ++rank) t.push_back(read_trace(j, dir, f, rank));
    expect_identical(t, f);
    const float* x0 = t[0].before.data();  // island 0 (ranks 0, 1)
    const float* x1 = t[2].before.data();  // island 1 (ranks 2, 3)
    const float* got = t[0].after.data();
    double worst = 0;
    // One fragment, one segment: wire blocks are elements [64b, 64b + 64).
    for (size_t b = 0; b * 64 < j.n; ++b) {
      const size_t lo = b * 64, hi = std::min(j.n, lo + 64);
      double a0 = 0, a1 = 0, am = 0;
      for (size_t i = lo; i < hi; ++i) {
        a0 = std::max(a0, std::fabs(static_cast<double>(x0[i])));
        a1 = std::max(a1, std::fabs(static_cast<double>(x1[i])));
        am = std::max(am, std::fabs((static_cast<double>(x0[i]) + x1[i]) / 2));
      }
      for (size_t i = lo; i < hi; ++i) {
        const double mean = (static_cast<double>(x0[i]) + x1[i]) / 2, d = std::fabs(got[i] - mean);
        double bound;
        if (std::string(f) == "fp32") {
          bound = 0;
          EXPECT_EQ(got[i], (x0[i] + x1[i]) / 2) << "fp32 element " << i;
        } else if (std::string(f) == "bf16") {  // |Q(x) − x| <= |x|/256, twice
          const double in = (std::fabs(x0[i]) + std::fabs(x1[i])) / 2 / 256;
          bound = in + (std::fabs(mean) + in) / 256;
        } else {  // per block: c·absmax, for the inputs and for the mean of their decodings
          const double c = std::string(f) == "int8" ? 1.0 / 254 : 1.0 / 6, in = c * (a0 + a1) / 2;
          bound = in + c * (am + in);
        }
        bound = bound * (1 + 1e-5) + 1e-7 * am;  // float32 rounding of scales and sums
        worst = std::max(worst, bound > 0 ? d / bound : 0);
        ASSERT_LE(d, bound) << f << " element " << i << ": " << got[i] << " vs mean " << mean;
      }
    }
    std::printf("%s: compressed average within %.3f of its bound, identical on %d ranks\n", f, worst, j.ranks);
  }
}

// Streaming with F = 1 and τ = 0 through step() is the plain sync() every H steps, bit for bit.
TEST(OuterSync, StreamingF1Tau0EqualsPlain) {
  Job streaming, plain;
  streaming.steps = plain.steps = 9;
  streaming.args = {"--every", "3", "--fragments", "1", "--overlap", "0", "--formats", "fp4"};
  plain.args = {"--every", "3", "--manual", "--formats", "fp4"};
  std::vector<Trace> a = run_and_read(streaming, "fp4"), b = run_and_read(plain, "fp4");
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    EXPECT_TRUE(same_bits(a[r].after, b[r].after)) << "rank " << r;
    EXPECT_TRUE(same_bits(a[r].global, b[r].global)) << "rank " << r;
  }
  EXPECT_FALSE(same_bits(a[0].after, a[0].before));
}

// Saved at step 6 with fragment 0's exchange still to be applied (τ = 1), loaded into a
// fresh job: steps 7..12 and the final state are those of the run that never stopped.
TEST(OuterSync, ResumeFromSavedStateIsBitExact) {
  Job full;
  full.steps = 12;
  full.args = {"--every", "4", "--fragments", "2", "--overlap", "1", "--formats", "int8", "--save-at", "6",
               "--segments", "300,300,400"};
  std::string saved;
  std::vector<Trace> a = run_and_read(full, "int8", &saved);
  ASSERT_EQ(a.size(), 4u);
  Job resumed = full;
  resumed.first = 7;
  resumed.args.insert(resumed.args.end(), {"--load", saved});
  std::vector<Trace> b = run_and_read(resumed, "int8");
  ASSERT_EQ(b.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    std::vector<float> tail(a[r].after.end() - 6 * full.n, a[r].after.end());
    EXPECT_TRUE(same_bits(tail, b[r].after)) << "rank " << r << ": steps 7..12 differ after resuming";
    EXPECT_TRUE(same_bits(a[r].global, b[r].global)) << "rank " << r;
  }
}

// The C API drives the same object: same results as the C++ API, bit for bit.
TEST(OuterSync, CApiMatchesCppApi) {
  Job cpp, c;
  cpp.env = c.env = {};
  cpp.args = {"--islands", "2", "--every", "2", "--formats", "bf16", "--segments", "500,500", "--fragments", "2"};
  c.args = cpp.args;
  c.args.push_back("--c-api");
  std::vector<Trace> a = run_and_read(cpp, "bf16"), b = run_and_read(c, "bf16");
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    EXPECT_TRUE(same_bits(a[r].after, b[r].after)) << "rank " << r;
    EXPECT_EQ(a[r].bytes, b[r].bytes);
  }
}

// Arguments that cannot work are refused on every rank with the reason, promptly.
TEST(OuterSync, BadConfigurationsAreRefusedOnEveryRank) {
  struct Bad {
    std::map<std::string, std::string> env;
    std::vector<std::string> args;
    std::string message;
  };
  std::vector<Bad> bad = {
      {{{"STRATA_HIERARCHY", "node:2"}}, {"--bad-rank", "2"}, "rank 2 differs from rank 0 in the schedule"},
      {{}, {"--islands", "3"}, "3 islands do not divide 4 ranks"},
      {{{"STRATA_HIERARCHY", "node:2"}}, {"--islands", "4"}, "split a group of the hierarchy's outermost level"},
      {{}, {"--every", "4", "--overlap", "4"}, "overlap (tau) must be from 0 to every - 1"},
      {{}, {"--every", "2", "--fragments", "3", "--segments", "500,250,250"}, "fragments must be from 1 to every"},
      {{}, {"--every", "4", "--fragments", "3", "--segments", "500,500"}, "3 fragments but only 2 segments"},
      {{}, {"--segments", "500,400"}, "segment lengths sum to 900, not the count 1000"},
      {{}, {"--mix", "1.5"}, "mix (alpha) must be in [0, 1]"},
  };
  for (const Bad& b : bad) {
    Job j;
    j.env = b.env;
    j.args = b.args;
    strata_test::ProcResult r = run_job(j, temp_dir());
    EXPECT_TRUE(r.exited && r.exit_code != 0) << r.describe();
    EXPECT_LT(r.elapsed_s, 20) << "took " << r.elapsed_s << " s";
    for (int rank = 0; rank < 4; ++rank) {
      // strata-run stops the others when one rank fails, so each rank that reported
      // must report this reason.
      for (const std::string& line : strata_test::lines_containing(r.out, "[" + std::to_string(rank) + "] error"))
        EXPECT_NE(line.find(b.message), std::string::npos) << line;
    }
    EXPECT_NE(r.out.find(b.message), std::string::npos) << strata_test::tail(r.out);
  }
}

// A rank that dies before an outer step (streaming: an exchange of a fragment runs in the
// background) is an error on every other rank, promptly, never a hang.
TEST(OuterSync, DeadRankIsAnErrorOnTheOthers) {
  const int T = 20;
  strata_test::Job job = strata_test::spawn(
      {OUTER_SYNC_WORKER_PATH, "--out", temp_dir(), "--steps", "8", "--every", "2", "--fragments", "2", "--overlap",
       "1", "--die-rank", "3", "--die-at", "5"},
      4, {{"STRATA_HIERARCHY", "node:2"}, {"STRATA_TIMEOUT", std::to_string(T)}}, {}, T + 30);
  ASSERT_EQ(job.ranks.size(), 4u);
  EXPECT_EQ(job.ranks[3].term_signal, SIGKILL) << job.dump();
  for (int r : {0, 1, 2}) {
    const strata_test::ProcResult& p = job.ranks[r];
    EXPECT_FALSE(p.killed_by_deadline) << "rank " << r << " hung\n" << job.dump();
    EXPECT_TRUE(p.exited && p.exit_code == 1) << "rank " << r << ": " << p.describe() << "\n" << job.dump();
    EXPECT_LT(p.elapsed_s, 10.0) << "rank " << r << " noticed late\n" << job.dump();
    const std::vector<std::string> errors = strata_test::lines_containing(p.out, "error: ");
    ASSERT_FALSE(errors.empty()) << job.dump();
    // Ranks 1 (its crossing partner) and 2 (its island mate) lose rank 3 itself and must
    // name it by its rank in the job, not in the sub-communicator.
    if (r != 0) {
      EXPECT_NE(errors[0].find("job rank 3"), std::string::npos) << errors[0];
    }
    std::printf("rank %d after %.1f s: %s\n", r, p.elapsed_s, errors[0].c_str());
  }
}
