// strata-shrink-worker MODE: one rank of a job started by test_shrink (spawned directly, as
// strata-run would stop the survivors). All ranks loop over all_reduces until one fails;
// the survivors then shrink and run collectives on the new communicator, each checked
// against a formula; a member that dies after the shrink makes them shrink again.
//
//   killed  : rank SHRINK_KILL SIGKILLs itself SHRINK_KILL_MS into the loop
//   stopped : rank SHRINK_STOP SIGSTOPs itself SHRINK_STOP_MS into the loop (a child kills it
//             STRATA_TIMEOUT + SHRINK_REAP_S later); with SHRINK_KILL set too, that rank is
//             killed SHRINK_KILL_MS into the loop (later), so the survivors' call names it,
//             and their shrink must itself find the stopped rank
//   Any mode: rank SHRINK_SECOND SIGKILLs itself SHRINK_SECOND_US after it enters its
//   shrink (a rank dying during the shrink).
//
// Lines on stderr: KILLING/STOPPING at=<CLOCK_MONOTONIC s>; CAUGHT <error>; SHRUNK old= new=
// size= attempt= at= took= members=<old ranks, in new order> nodes=<node of each new rank>;
// CHECK name= outcome=ok|wrong|error; PARENT-THREW <error>; DONE. Exit codes: 0 the checks
// passed, 3 this rank was left out (SHRINK-FAILED), 4 no failure came, 5 a check was wrong,
// 10 init failed.
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <strata/strata.hpp>

#include "worker_common.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

using namespace strata;

namespace {

using strata_test::env_int;
using strata_test::init_or_exit;
using strata_test::mono_s;
using strata_test::report;
using strata_test::signal_self_after;

bool check(const char* name, const std::function<void()>& call, const std::function<bool()>& right) {
  try {
    call();
  } catch (const Error& e) {
    fprintf(stderr, "CHECK name=%s outcome=error%s\n", name, strata_test::error_fields(e).c_str());
    throw;
  }
  const bool ok = right();
  fprintf(stderr, "CHECK name=%s outcome=%s\n", name, ok ? "ok" : "wrong");
  return ok;
}

// Every collective on the new communicator, each against its formula. Throws a peer's
// failure (then the caller shrinks again); returns false when a result was wrong.
bool run_checks(Comm& c) {
  const int n = c.size(), r = c.rank();
  const size_t m = 1000, big = size_t(1) << 20;
  bool ok = true;
  std::vector<float> x(big), y(big);
  for (size_t i = 0; i < big; ++i) x[i] = static_cast<float>(r + 1 + i % 7);
  ok &= check("all_reduce", [&] { c.all_reduce(x.data(), y.data(), big, DataType::float32, ReduceOp::sum); }, [&] {
    for (size_t i = 0; i < big; ++i)
      if (y[i] != static_cast<float>(n * (n + 1) / 2 + n * static_cast<int>(i % 7))) return false;
    return true;
  });
  std::vector<int32_t> s(n * m), t(n * m);
  for (size_t j = 0; j < s.size(); ++j) s[j] = r + static_cast<int32_t>(j);
  ok &= check("reduce_scatter", [&] { c.reduce_scatter(s.data(), t.data(), m, DataType::int32, ReduceOp::sum); }, [&] {
    for (size_t i = 0; i < m; ++i)
      if (t[i] != n * (n - 1) / 2 + n * static_cast<int32_t>(r * m + i)) return false;
    return true;
  });
  for (size_t i = 0; i < m; ++i) s[i] = r * 1000 + static_cast<int32_t>(i);
  ok &= check("all_gather", [&] { c.all_gather(s.data(), t.data(), m, DataType::int32); }, [&] {
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < m; ++i)
        if (t[p * m + i] != p * 1000 + static_cast<int32_t>(i)) return false;
    return true;
  });
  for (size_t i = 0; i < m; ++i) s[i] = r == n - 1 ? 42 + static_cast<int32_t>(i) : -1;
  ok &= check("broadcast", [&] { c.broadcast(s.data(), s.data(), m, DataType::int32, n - 1); }, [&] {
    for (size_t i = 0; i < m; ++i)
      if (s[i] != 42 + static_cast<int32_t>(i)) return false;
    return true;
  });
  for (size_t i = 0; i < m; ++i) s[i] = r + static_cast<int32_t>(i);
  ok &= check("reduce", [&] { c.reduce(s.data(), t.data(), m, DataType::int32, ReduceOp::max, 0); }, [&] {
    if (r != 0) return true;
    for (size_t i = 0; i < m; ++i)
      if (t[i] != n - 1 + static_cast<int32_t>(i)) return false;
    return true;
  });
  for (int p = 0; p < n; ++p)
    for (size_t i = 0; i < m; ++i) s[p * m + i] = r * 100 + p + static_cast<int32_t>(i);
  ok &= check("all_to_all", [&] { c.all_to_all(s.data(), t.data(), m, DataType::int32); }, [&] {
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < m; ++i)
        if (t[p * m + i] != p * 100 + r + static_cast<int32_t>(i)) return false;
    return true;
  });
  int32_t out = r, in = -1;
  ok &= check("send_recv_ring", [&] {
    c.group_start();
    c.send(&out, 1, DataType::int32, (r + 1) % n);
    c.recv(&in, 1, DataType::int32, (r - 1 + n) % n);
    c.group_end();
  }, [&] { return in == (r - 1 + n) % n; });
  ok &= check("barrier", [&] { c.barrier(); }, [] { return true; });
  return ok;
}

// Shrinks until the checks run through on a communicator with no dead member.
int shrink_and_check(Comm& comm, int old_rank) {
  const int second = env_int("SHRINK_SECOND", -1);
  Comm parent = comm;
  for (int attempt = 1; attempt <= 4; ++attempt) {
    if (old_rank == second && attempt == 1) signal_self_after(env_int("SHRINK_SECOND_US", 0), SIGKILL, "KILLING-IN-SHRINK");
    const double t0 = mono_s();
    Comm c;
    try {
      c = parent.shrink();
    } catch (const Error& e) {
      report("SHRINK-FAILED", e);
      return 3;
    }
    const double took = mono_s() - t0;
    // Which old rank each new rank is, and its node: the numbering and the hierarchy.
    std::vector<int32_t> olds(c.size());
    int32_t mine = old_rank;
    std::string members, nodes;
    try {
      c.all_gather(&mine, olds.data(), 1, DataType::int32);
    } catch (const Error& e) {
      report("CAUGHT", e);
      parent = c;
      continue;
    }
    for (int32_t o : olds) members += (members.empty() ? "" : ",") + std::to_string(o);
    const std::vector<HierarchyLevel> levels = c.hierarchy();
    for (int g : levels.front().group) nodes += (nodes.empty() ? "" : ",") + std::to_string(g);
    fprintf(stderr, "SHRUNK old=%d new=%d size=%d attempt=%d at=%.6f took=%.3f members=%s nodes=%s\n", old_rank, c.rank(),
            c.size(), attempt, mono_s(), took, members.c_str(), nodes.c_str());
    fflush(stderr);
    bool ok;
    try {
      ok = run_checks(c);
    } catch (const Error& e) {
      report("CAUGHT", e);
      parent = c;
      continue;
    }
    // The parent is unusable now, and can be destroyed.
    try {
      comm.barrier();
      fprintf(stderr, "PARENT-DID-NOT-THROW\n");
    } catch (const Error& e) {
      report("PARENT-THREW", e);
    }
    try {  // a second shrink of the same communicator has no peers to agree with
      comm.shrink();
      fprintf(stderr, "SHRINK-AGAIN-DID-NOT-THROW\n");
    } catch (const InvalidUsage& e) {
      report("SHRINK-AGAIN-REFUSED", e);
    } catch (const Error& e) {
      report("SHRINK-AGAIN-THREW-OTHERWISE", e);
    }
    comm.destroy();
    c.destroy();
    fprintf(stderr, "DONE at=%.6f\n", mono_s());
    return ok ? 0 : 5;
  }
  return 3;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  Comm comm = init_or_exit();
  const int rank = comm.rank();
  std::vector<float> x(env_int("SHRINK_COUNT", 1 << 16), 1.0f), y(x.size());
  // The barrier is inside the try: a rank leaves it before the slowest one has, and under
  // load its fault may come before that one has left it.
  try {
    comm.barrier();
    const long after_us = env_int("SHRINK_KILL_MS", 100) * 1000L;
    if (rank == env_int("SHRINK_KILL", -1)) signal_self_after(after_us, SIGKILL, "KILLING");
    if (mode == "stopped" && rank == env_int("SHRINK_STOP", -1)) {
      strata_test::reap_later(env_int("STRATA_TIMEOUT", 30) + env_int("SHRINK_REAP_S", 4));
      signal_self_after(env_int("SHRINK_STOP_MS", 100) * 1000L, SIGSTOP, "STOPPING");
    }
    const double t0 = mono_s();
    while (mono_s() - t0 < 3.0 * env_int("STRATA_TIMEOUT", 30))
      comm.all_reduce(x.data(), y.data(), x.size(), DataType::float32, ReduceOp::sum);
  } catch (const Error& e) {
    report("CAUGHT", e);
    return shrink_and_check(comm, rank);
  }
  fprintf(stderr, "NO-ERROR\n");
  return 4;
}
