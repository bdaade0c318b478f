#include "link_ranks.hpp"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "core/bootstrap/bootstrap.hpp"
#include "ground/settings.hpp"
#include "process_roles.hpp"
#include "strata/error.hpp"

namespace strata_test {

namespace {

std::map<std::string, Scenario>& scenarios() {
  static std::map<std::string, Scenario> all;
  return all;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  for (size_t at = 0;;) {
    const size_t comma = s.find(',', at);
    out.push_back(s.substr(at, comma == std::string::npos ? comma : comma - at));
    if (comma == std::string::npos) return out;
    at = comma + 1;
  }
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

// Every job of this test process gets its own tag: abstract socket names carry it.
uint64_t next_tag() {
  static uint64_t count = 0;
  return (static_cast<uint64_t>(getpid()) << 20) | ++count;
}

}  // namespace

strata::Link& LinkRank::device(int peer) {
  auto& l = connector->links(strata::MemoryKind::device).at(static_cast<size_t>(peer));
  if (!l) throw std::runtime_error("no device link to rank " + std::to_string(peer));
  return *l;
}

void fail(const std::string& what) { throw std::runtime_error(what); }

std::vector<int> peers_of(const LinkRank& me) {
  std::vector<int> p;
  for (int r = 0; r < me.nranks; ++r)
    if (r != me.rank) p.push_back(r);
  return p;
}

std::vector<strata::Link*> links_of(LinkRank& me) {
  std::vector<strata::Link*> l;
  for (int p : peers_of(me)) l.push_back(&me.device(p));
  return l;
}

bool add_scenario(const std::string& name, Scenario run) {
  scenarios()[name] = std::move(run);
  return true;
}

std::vector<ProcResult> run_job(const std::string& scenario, const std::vector<RankSpec>& ranks,
                                const std::map<std::string, std::string>& env,
                                const std::function<void(std::vector<Process>&)>& meanwhile, double deadline_s) {
  const int n = static_cast<int>(ranks.size());
  std::vector<strata::net::Fd> listeners;
  std::vector<std::string> ports, fds, hosts;
  for (int r = 0; r < n; ++r) {
    listeners.push_back(strata::net::listen_on(strata::net::parse_host_port("127.0.0.1:0")));
    fcntl(listeners.back().get(), F_SETFD, 0);  // inherited by every rank; each accepts on its own
    ports.push_back(std::to_string(strata::net::local_address(listeners.back().get()).port()));
    fds.push_back(std::to_string(listeners.back().get()));
    hosts.push_back(ranks[static_cast<size_t>(r)].host);
  }
  const std::string tag = std::to_string(next_tag());
  std::vector<Process> procs;
  for (int r = 0; r < n; ++r) {
    std::map<std::string, std::string> e = env;
    for (const auto& [k, v] : ranks[static_cast<size_t>(r)].env) e[k] = v;
    procs.push_back(start_role("--link-rank", {scenario, std::to_string(r), tag, join(hosts), join(ports), fds[static_cast<size_t>(r)]}, e));
  }
  listeners.clear();
  if (meanwhile) meanwhile(procs);
  std::vector<ProcResult> out;
  for (Process& p : procs) out.push_back(p.finish(deadline_s));
  return out;
}

void drive(const std::vector<strata::Link*>& links, double seconds) {
  const double until = now_s() + seconds;
  for (unsigned quiet = 0;;) {
    bool moved = false, idle = true;
    for (strata::Link* l : links)
      if (!l->idle()) {
        moved |= l->progress();
        idle &= l->idle();
      }
    if (idle) return;
    if (moved) {
      quiet = 0;
      continue;
    }
    if (++quiet % 64 == 0) {
      if (now_s() > until) throw std::runtime_error("the links stalled for " + std::to_string(seconds) + " s");
      sched_yield();
    }
  }
}

int link_rank_role(int argc, char** argv) {
  if (argc < 8) return 2;
  const std::string scenario = argv[2];
  LinkRank me;
  me.rank = std::atoi(argv[3]);
  const uint64_t tag = std::strtoull(argv[4], nullptr, 10);
  const std::vector<std::string> hosts = split(argv[5]), ports = split(argv[6]);
  me.nranks = static_cast<int>(hosts.size());
  strata::net::Fd listener(std::atoi(argv[7]));
  auto it = scenarios().find(scenario);
  if (it == scenarios().end()) {
    std::fprintf(stderr, "link rank: no scenario %s\n", scenario.c_str());
    return 2;
  }
  try {
    me.table.resize(static_cast<size_t>(me.nranks));
    for (int r = 0; r < me.nranks; ++r) {
      auto& info = me.table[static_cast<size_t>(r)];
      info.listen = strata::net::parse_host_port("127.0.0.1:" + ports[static_cast<size_t>(r)]);
      std::snprintf(info.host, sizeof info.host, "%s", hosts[static_cast<size_t>(r)].c_str());
      info.tcp_nsocks = 2;
    }
    strata::bootstrap::Secret secret{};
    for (int i = 0; i < 16; ++i) secret.bytes[i] = static_cast<uint8_t>(0xa5 ^ (i * 29) ^ tag);
    me.cfg = strata::Config::from_env();
    me.control = std::make_unique<strata::ControlChannel>(me.rank, me.nranks, me.cfg);
    me.connector = std::make_unique<strata::Connector>(me.rank, me.table, strata::net::Incoming(std::move(listener)),
                                                       secret, tag, me.cfg, *me.control);
    me.connector->allow_device(true);
    for (int p : peers_of(me)) me.connector->want(p, strata::MemoryKind::device);
    for (const double until = now_s() + 30;;) {
      me.control->check_now();
      bool all = true;
      for (int p : peers_of(me)) all &= me.connector->ready(p, strata::MemoryKind::device);
      if (all) break;
      if (now_s() > until) throw std::runtime_error("the links were not connected within 30 s");
      usleep(200);
    }
    it->second(me);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "link rank %d: %s\n", me.rank, e.what());
    return 1;
  }
  std::printf("link rank %d: passed\n", me.rank);
  std::fflush(stdout);
  return 0;
}

}  // namespace strata_test
