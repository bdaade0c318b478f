// One process of tests/grow: an existing rank that opens a door and grows its communicator,
// or a newcomer that joins it.
//
//   grow_worker existing --new N --door FILE [--shrink-first] [--c-api]
//       joins its job (init_from_env); with --shrink-first the job's last rank SIGKILLs
//       itself and the others shrink; then rank 0 opens a door and writes its id to FILE,
//       every rank waits until N newcomers are there and grows (key: its rank).
//   grow_worker newcomer --key K --door FILE [--vanish] [--c-api]
//       reads the id from FILE and joins with key K; with --vanish it speaks the door's
//       protocol itself and dies (SIGKILL) as soon as a grow has taken it in, before it
//       connects.
//
// Every rank of a grown communicator prints "grown: rank R of N, sum S" (S: the all_reduce
// of rank + 1); an existing rank then prints "old communicator: sum S" (of 1 per rank) or,
// first, "grow failed: ..." when the grow did.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "core/bootstrap/unique_id.hpp"
#include "core/comm_state.hpp"
#include "core/door.hpp"
#include "strata.h"
#include "strata/strata.hpp"

namespace {

using namespace std::chrono_literals;

struct Args {
  std::string role, door;
  int newcomers = 0, key = 0;
  bool shrink_first = false, c_api = false, vanish = false;
};

Args parse(int argc, char** argv) {
  Args a;
  a.role = argc > 1 ? argv[1] : "";
  for (int i = 2; i < argc; ++i) {
    const std::string k = argv[i];
    auto val = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (k == "--new") a.newcomers = std::stoi(val());
    else if (k == "--key") a.key = std::stoi(val());
    else if (k == "--door") a.door = val();
    else if (k == "--shrink-first") a.shrink_first = true;
    else if (k == "--c-api") a.c_api = true;
    else if (k == "--vanish") a.vanish = true;
    else throw std::runtime_error("unknown argument " + k);
  }
  return a;
}

void check(strataResult_t r, const char* what) {
  if (r != strataSuccess) throw std::runtime_error(std::string(what) + ": " + strataGetLastError());
}

// A communicator through either API.
struct Comm {
  strata::Comm cpp;
  strataComm_t c = nullptr;

  int rank() const {
    int r = 0;
    if (c) check(strataCommRank(c, &r), "strataCommRank");
    return c ? r : cpp.rank();
  }
  int size() const {
    int n = 0;
    if (c) check(strataCommCount(c, &n), "strataCommCount");
    return c ? n : cpp.size();
  }
  int sum(int x) {
    int out = 0;
    if (c) check(strataAllReduce(&x, &out, 1, strataInt32, strataSum, c, nullptr), "strataAllReduce");
    else cpp.all_reduce(&x, &out, 1, strata::DataType::int32, strata::ReduceOp::sum);
    return out;
  }
  strata::UniqueId open_door() {
    if (!c) return cpp.open_door("127.0.0.1:0");
    strataUniqueId id;
    check(strataCommOpenDoor(c, "127.0.0.1:0", &id), "strataCommOpenDoor");
    strata::UniqueId u;
    std::memcpy(u.bytes.data(), id.internal, sizeof id.internal);
    return u;
  }
  int newcomers() {
    int n = 0;
    if (c) check(strataCommNewcomers(c, &n), "strataCommNewcomers");
    return c ? n : cpp.newcomers();
  }
  Comm grow(int count, int key) {
    Comm g;
    if (c) check(strataCommGrow(c, count, key, &g.c), "strataCommGrow");
    else g.cpp = cpp.grow(count, key);
    return g;
  }
  static Comm join(const strata::UniqueId& id, int key, bool c_api) {
    Comm g;
    if (!c_api) {
      g.cpp = strata::Comm::join(id, key);
      return g;
    }
    strataUniqueId cid;
    std::memcpy(cid.internal, id.bytes.data(), sizeof cid.internal);
    check(strataCommJoin(cid, key, &g.c), "strataCommJoin");
    return g;
  }
  void destroy() {
    if (c) check(strataCommDestroy(c), "strataCommDestroy");
    else cpp.destroy();
  }
};

void report_grown(Comm& g) {
  const int n = g.size();
  std::printf("grown: rank %d of %d, sum %d\n", g.rank(), n, g.sum(g.rank() + 1));
  std::fflush(stdout);
}

std::string hex(const strata::UniqueId& id) {
  std::string s;
  char b[3];
  for (uint8_t x : id.bytes) {
    std::snprintf(b, sizeof b, "%02x", x);
    s += b;
  }
  return s;
}

strata::UniqueId read_door(const std::string& path) {
  for (int tries = 0; tries < 3000; ++tries, std::this_thread::sleep_for(10ms)) {
    std::ifstream f(path);
    std::string text;
    if (!(f >> text)) continue;
    strata::UniqueId id;
    if (strata::bootstrap::parse_hex(text, id.bytes.data(), id.bytes.size())) return id;
  }
  throw std::runtime_error("no door id in " + path);
}

void existing(const Args& a) {
  Comm job;
  if (a.c_api) check(strataCommInitFromEnv(&job.c), "strataCommInitFromEnv");
  else job.cpp = strata::Comm::init_from_env();
  if (a.shrink_first) {
    job.sum(1);  // everyone is there
    if (job.rank() == job.size() - 1) raise(SIGKILL);
    try {
      job.sum(1);
    } catch (const std::exception&) {  // the rank that died
    }
    Comm left;
    if (job.c) check(strataCommShrink(job.c, &left.c), "strataCommShrink");
    else left.cpp = job.cpp.shrink();
    job.destroy();
    job = left;
    std::printf("shrunk to %d ranks\n", job.size());
  }
  const strata::UniqueId id = job.open_door();
  if (job.rank() == 0) {
    std::ofstream(a.door + ".tmp") << hex(id) << "\n";
    std::rename((a.door + ".tmp").c_str(), a.door.c_str());
  }
  while (job.newcomers() < a.newcomers) std::this_thread::sleep_for(20ms);
  try {
    Comm grown = job.grow(a.newcomers, job.rank());
    report_grown(grown);
    grown.destroy();
  } catch (const std::exception& e) {
    std::printf("grow failed: %s\n", e.what());
  }
  std::printf("old communicator: sum %d\n", job.sum(1));
  job.destroy();
}

// The door's protocol by hand (core/door.hpp): a valid hello and description, then gone
// once a grow has taken this newcomer in.
void vanish(const strata::UniqueId& id, int key) {
  const strata::bootstrap::IdFields f = strata::bootstrap::decode_id(id);
  strata::net::Fd listener = strata::listen_like(f.root);
  strata::bootstrap::RankInfo mine = strata::my_info(strata::Config::from_env(), listener, -1);
  strata::net::Fd fd = strata::net::connect_to(f.root, strata::net::deadline_after(30));
  const uint16_t port = mine.listen.port();
  mine.listen = strata::net::local_address(fd.get());
  mine.listen.set_port(port);
  const strata::net::Hello h =
      strata::net::make_hello(f.secret.bytes, strata::kDoorTag, key, 0, strata::net::Role::join, 0);
  strata::net::send_all(fd.get(), &h, sizeof h, strata::net::deadline_after(5), "door");
  strata::net::send_all(fd.get(), &mine, sizeof mine, strata::net::deadline_after(5), "door");
  char first;
  strata::net::recv_all(fd.get(), &first, 1, strata::net::deadline_after(30), "door");
  std::printf("taken in by a grow: vanishing\n");
  std::fflush(stdout);
  raise(SIGKILL);
}

void newcomer(const Args& a) {
  const strata::UniqueId id = read_door(a.door);
  if (a.vanish) return vanish(id, a.key);
  Comm g = Comm::join(id, a.key, a.c_api);
  report_grown(g);
  g.destroy();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    if (a.role == "existing") existing(a);
    else if (a.role == "newcomer") newcomer(a);
    else throw std::runtime_error("the role is existing or newcomer");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "grow_worker: %s\n", e.what());
    return 1;
  }
}
