// strata-topo: what a job sees on this host (packages, NUMA nodes, GPUs with their NUMA
// node and nearest NIC, NICs and RDMA devices, NVLink bandwidths).
//
//   strata-topo                      this machine (or STRATA_TOPO_FILE)
//   strata-topo --topo-file F.xml    an hwloc XML file
//   strata-topo --pci                also print the PCI tree
//
// The report is a list of sections, each a function of what was loaded; main only parses
// options and calls them. A section about the job (ranks on this host and the hierarchy,
// when running under strata-run) goes after the host sections.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "core/comm_info.hpp"
#include "topology/topology.hpp"

namespace {

struct Options {
  std::string topo_file;  // empty: STRATA_TOPO_FILE, else this machine
  bool pci = false;
};

void usage(FILE* f) {
  fprintf(f,
          "usage: strata-topo [--topo-file FILE] [--pci]\n"
          "  Prints the host topology a Strata job sees: packages, NUMA nodes, GPUs with\n"
          "  their NUMA node and nearest NIC, NICs and RDMA devices, NVLink bandwidths.\n"
          "  --topo-file FILE  read an hwloc XML file instead of this machine\n"
          "                    (default: $STRATA_TOPO_FILE when set)\n"
          "  --pci             also print the PCI tree\n");
}

// Returns false (after printing why) on a bad command line.
bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      usage(stdout);
      exit(0);
    } else if (a == "--topo-file" || a == "-f") {
      if (i + 1 >= argc) {
        fprintf(stderr, "strata-topo: %s needs a file name\n", a.c_str());
        return false;
      }
      o.topo_file = argv[++i];
    } else if (a.rfind("--topo-file=", 0) == 0) {
      o.topo_file = a.substr(strlen("--topo-file="));
    } else if (a == "--pci") {
      o.pci = true;
    } else {
      fprintf(stderr, "strata-topo: unknown argument '%s'\n", a.c_str());
      return false;
    }
  }
  return true;
}

}  // namespace

// The communicator's view: hierarchy, and every rank's host and transport per peer.
void print_job(std::ostream& out) {
  strata::Comm c = strata::Comm::init_from_env();
  constexpr size_t kLine = 4096;
  std::string mine = strata::describe_links(c);
  mine.resize(kLine - 1);
  std::vector<char> all(kLine * static_cast<size_t>(c.size()));
  c.all_gather(mine.c_str(), all.data(), kLine, strata::DataType::uint8);
  if (c.rank() == 0) {
    out << "\nJob: " << c.size() << " ranks\n  hierarchy: " << strata::describe_hierarchy(c) << "\n";
    for (int r = 0; r < c.size(); ++r) out << "  rank " << r << ": " << &all[kLine * static_cast<size_t>(r)] << "\n";
  }
  c.destroy();
}

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    usage(stderr);
    return 2;
  }
  try {
    // Under a launcher, the first rank of each host shows its host, and rank 0 the job.
    const char* local = std::getenv("STRATA_LOCAL_RANK");
    bool in_job = std::getenv("STRATA_RANK") != nullptr;
    if (!in_job || !local || std::string(local) == "0") {
      strata::topo::HostTopology t = o.topo_file.empty() ? strata::topo::load_host_topology()
                                                         : strata::topo::load_topology_file(o.topo_file);
      strata::topo::print_host_topology(std::cout, t);
      if (o.pci) strata::topo::print_pci_tree(std::cout, t);
    }
    if (in_job) print_job(std::cout);
  } catch (const std::exception& e) {
    std::cout.flush();
    fprintf(stderr, "strata-topo: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
