// strata-run: starts N local ranks of a command, the way Strata jobs run on one machine.
#include <cstdlib>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <optional>
#include <string>

#include "cluster.hpp"
#include "job.hpp"
#include "job_env.hpp"
#include "options.hpp"
#include "signals.hpp"

extern char** environ;

namespace {

// With 0, 1 or 2 closed, a pipe could be created on one of those numbers and then be
// mistaken for (or clobbered as) a standard stream in a rank.
void ensure_standard_fds_open() {
  for (int fd = 0; fd <= 2; ++fd)
    if (::fcntl(fd, F_GETFD) < 0) ::open("/dev/null", O_RDWR);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace strata::launcher;
  ensure_standard_fds_open();

  ParseResult parsed = parse_options(argc, argv);
  switch (parsed.action) {
    case ParseResult::Action::help:
      std::fputs(usage_text().c_str(), stdout);
      return 0;
    case ParseResult::Action::usage_error:
      std::fprintf(stderr, "strata-run: %s\n\n%s", parsed.error.c_str(), usage_text().c_str());
      return 2;
    case ParseResult::Action::run:
      break;
  }

  try {
    install_signal_handlers();
    const Options& opts = parsed.options;
    JobIdentity identity = make_job_identity();
    // Declared before the job, so it is torn down after the ranks are gone.
    std::optional<EmulatedCluster> cluster;
    if (opts.hosts > 0) {
      cluster.emplace(ClusterSpec{opts.hosts, opts.nranks,
                                  opts.subnet.value_or(default_subnet()), opts.link_rate});
      identity.root = cluster->root_address();
      // Tell the library's tuner what the shaped links carry, unless the user already did:
      // TCP payload is ~95% of the tbf rate (tbf counts Ethernet headers), and a veth
      // round trip costs tens of microseconds.
      if (opts.link_rate) {
        double payload_bytes = static_cast<double>(opts.link_rate->bits_per_second) / 8 * 0.95;
        setenv("STRATA_LINK_MODEL", ("top:50us:" + std::to_string(static_cast<uint64_t>(payload_bytes)) + "B").c_str(), 0);
      }
    }
    Job job(opts, std::move(identity), environ, cluster ? &*cluster : nullptr);
    return job.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata-run: %s\n", e.what());
    return 1;
  }
}
