// strata-reliability-worker MODE: one rank of a job started by test_reliability. Each mode
// is a call that one rank gets wrong (or that the ranks disagree on), followed by a call
// every rank gets right; each step prints one line on stderr:
//
//   STEP name=<step> outcome=ok|wrong|error [class=... kind=... peer=... msg=...]
//
// "wrong" means the call returned but the values differ from the serial computation.
//
//   overlap     : broadcast from root 1, whose buffers overlap without being in place
//   null        : all_reduce where rank 1's receive buffer is null
//   count       : all_reduce of 1024 floats, rank 1 passes 1000
//   collective  : rank 1 calls broadcast while the others call all_reduce
//   root        : broadcast, rank 2 names root 1 while the others name root 0
//   p2p_size    : rank 0 sends 4096 bytes to rank 1, which receives 4000
//   p2p_vs_coll : rank 0 sends to rank 1 while ranks 1.. call all_reduce
//   split_color : split where rank 1 passes color -2
//   start       : nothing wrong: prints READY t=<CLOCK_MONOTONIC seconds> once the
//                 communicator is made (the start-delay test)
// Every mode then runs an all_reduce of 4096 floats (rank r contributes r + 1 + i).
#include <time.h>

#include <strata/strata.hpp>

#include "error_fields.hpp"

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

using namespace strata;

namespace {

// Runs `call`; `right` says whether what it returned is right.
void step(const char* name, const std::function<void()>& call, const std::function<bool()>& right) {
  try {
    call();
    fprintf(stderr, "STEP name=%s outcome=%s\n", name, right() ? "ok" : "wrong");
  } catch (const Error& e) {
    fprintf(stderr, "STEP name=%s outcome=error%s\n", name, strata_test::error_fields(e).c_str());
  }
  fflush(stderr);
}

void good_all_reduce(Comm& comm) {
  const int n = comm.size(), r = comm.rank();
  std::vector<float> x(4096), y(4096, -1.f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(r + 1 + i % 7);
  step("all_reduce", [&] { comm.all_reduce(x.data(), y.data(), x.size(), DataType::float32, ReduceOp::sum); },
       [&] {
         for (size_t i = 0; i < y.size(); ++i)
           if (y[i] != static_cast<float>(n * (n + 1) / 2 + n * static_cast<int>(i % 7))) return false;
         return true;
       });
}

// Broadcast of 4096 floats from `root`; `overlap`: this rank's buffers overlap.
void broadcast(Comm& comm, int root, bool overlap) {
  std::vector<float> b(4097, static_cast<float>(comm.rank() == root ? 7 : 0));
  float* send = b.data();
  float* recv = overlap ? b.data() + 1 : b.data();
  step("first", [&] { comm.broadcast(send, recv, 4096, DataType::float32, root); },
       [&] { return recv[0] == 7.f && recv[4095] == 7.f; });
}

void all_reduce_of(Comm& comm, size_t count, float* recv_override, bool use_override) {
  const int n = comm.size();
  std::vector<float> x(count, 1.f), y(count, 0.f);
  float* recv = use_override ? recv_override : y.data();
  step("first", [&] { comm.all_reduce(x.data(), recv, count, DataType::float32, ReduceOp::sum); },
       [&] { return y[0] == static_cast<float>(n) && y[count - 1] == static_cast<float>(n); });
}

int run(Comm& comm, const std::string& mode) {
  const int r = comm.rank();
  if (mode == "overlap") {
    broadcast(comm, 1, r == 1);
  } else if (mode == "null") {
    all_reduce_of(comm, 1024, nullptr, r == 1);
  } else if (mode == "count") {
    all_reduce_of(comm, r == 1 ? 1000 : 1024, nullptr, false);
  } else if (mode == "collective") {
    if (r == 1) broadcast(comm, 0, false);
    else all_reduce_of(comm, 1024, nullptr, false);
  } else if (mode == "root") {
    broadcast(comm, r == 2 ? 1 : 0, false);
  } else if (mode == "p2p_size" || mode == "p2p_vs_coll") {
    std::vector<char> b(4096, static_cast<char>(r + 1));
    if (r == 0) {
      step("first", [&] { comm.send(b.data(), 4096, DataType::uint8, 1); }, [] { return true; });
    } else if (r == 1 && mode == "p2p_size") {
      step("first", [&] { comm.recv(b.data(), 4000, DataType::uint8, 0); }, [&] { return b[0] == 1; });
    } else if (mode == "p2p_vs_coll") {
      all_reduce_of(comm, 1024, nullptr, false);
    }
  } else if (mode == "start") {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    fprintf(stderr, "READY t=%.6f\n", ts.tv_sec + ts.tv_nsec * 1e-9);
  } else if (mode == "split_color") {
    Comm child;
    step("first", [&] { child = comm.split(r == 1 ? -2 : 0, r); }, [&] { return child.valid(); });
  } else {
    fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 11;
  }
  good_all_reduce(comm);
  try {
    comm.destroy();
  } catch (const Error&) {
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 11;
  Comm comm;
  try {
    comm = Comm::init_from_env();
  } catch (const Error& e) {
    fprintf(stderr, "INIT-FAILED %s\n", e.what());
    return 10;
  }
  return run(comm, argv[1]);
}
