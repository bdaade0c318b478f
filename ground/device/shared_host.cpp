#include "ground/device/shared_host.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "strata/error.hpp"

namespace strata::device {

namespace {

struct Index {
  RangeMap<RegionRef> regions;
  std::mutex m;                               // registrations
  std::map<const MemfdRegion*, int> counts;   // registered regions: registrations alive
};

Index& index() {
  static auto* i = new Index;  // kept until exit: allocations may outlive static destructors
  return *i;
}

// One line of /proc/self/maps.
struct Mapping {
  uintptr_t start = 0, end = 0;
  char perms[5] = {};
  unsigned long long offset = 0, inode = 0;
  unsigned dev_major = 0, dev_minor = 0;
  std::string path;
};

bool find_mapping(uintptr_t p, Mapping& out) {
  FILE* f = std::fopen("/proc/self/maps", "re");
  if (!f) throw SystemError(std::string("register: cannot read /proc/self/maps: ") + std::strerror(errno));
  char line[4096];
  bool found = false;
  while (!found && std::fgets(line, sizeof line, f)) {
    Mapping m;
    int path_at = 0;
    if (std::sscanf(line, "%lx-%lx %4s %llx %x:%x %llu %n", &m.start, &m.end, m.perms, &m.offset, &m.dev_major,
                    &m.dev_minor, &m.inode, &path_at) < 7)
      continue;
    if (p < m.start || p >= m.end) continue;
    m.path = line + path_at;
    while (!m.path.empty() && (m.path.back() == '\n' || m.path.back() == ' ')) m.path.pop_back();
    out = m;
    found = true;
  }
  std::fclose(f);
  return found;
}

// An fd of the file `m` maps: one of this process's open files with its device and inode,
// else (root only) /proc/self/map_files. -1: none.
int open_mapped_file(const Mapping& m) {
  const dev_t dev = makedev(m.dev_major, m.dev_minor);
  if (DIR* d = opendir("/proc/self/fd")) {
    int found = -1;
    while (dirent* e = readdir(d)) {
      const int fd = std::atoi(e->d_name);
      struct stat st {};
      if (e->d_name[0] == '.' || fd == dirfd(d) || fstat(fd, &st) != 0) continue;
      if (st.st_ino == m.inode && st.st_dev == dev) {
        found = fcntl(fd, F_DUPFD_CLOEXEC, 0);
        break;
      }
    }
    closedir(d);
    if (found >= 0) return found;
  }
  char name[80];
  std::snprintf(name, sizeof name, "/proc/self/map_files/%lx-%lx", m.start, m.end);
  return ::open(name, O_RDWR | O_CLOEXEC);
}

std::string range_text(const void* p, size_t bytes) {
  return std::to_string(bytes) + " bytes at " + address_text(p);
}

}  // namespace

RegionRef shareable_host_region(const void* p, size_t bytes) {
  RegionRef r = index().regions.find(p).value_or(nullptr);
  if (!r || bytes > r->length - static_cast<size_t>(static_cast<const char*>(p) - r->base)) return nullptr;
  return r;
}

void index_shareable(const RegionRef& r) { index().regions.insert(r->base, r->length, r); }

void unindex_shareable(const MemfdRegion* r) {
  Index& ix = index();
  if (RegionRef held = ix.regions.find(r->base).value_or(nullptr); held.get() == r) ix.regions.erase(r->base);
}

RegionRef register_shareable(const void* p, size_t bytes) {
  if (!p || bytes == 0) throw InvalidArgument("register: " + range_text(p, bytes) + " is no buffer (null or empty)");
  Index& ix = index();
  std::lock_guard lk(ix.m);
  if (RegionRef r = shareable_host_region(p, bytes)) {
    if (r->origin == Origin::registered) ++ix.counts[r.get()];
    return r;
  }
  if (RegionRef r = ix.regions.find(p).value_or(nullptr))
    throw InvalidArgument("register: " + range_text(p, bytes) + " runs past the end of the shareable allocation at " +
                          address_text(r->base) + " (" + std::to_string(r->length) + " bytes)");
  Mapping m;
  const auto at = reinterpret_cast<uintptr_t>(p);
  if (!find_mapping(at, m))
    throw InvalidArgument("register: " + range_text(p, bytes) + " is not mapped in this process");
  const std::string advice =
      "; allocate it with strata::alloc(bytes, MemoryKind::host) / strataMemAllocHost, or map a memfd MAP_SHARED";
  if (m.perms[3] != 's')
    throw InvalidArgument("register: " + range_text(p, bytes) +
                          " is private memory (malloc, new, the stack or a MAP_PRIVATE mapping), which no other "
                          "process can map" + advice);
  if (bytes > m.end - at)
    throw InvalidArgument("register: " + range_text(p, bytes) + " runs past the end of its shared mapping (" +
                          std::to_string(m.end - at) + " bytes left)" + advice);
  if (m.offset != 0)
    throw InvalidArgument("register: " + range_text(p, bytes) + " lies in a mapping of " + m.path +
                          " from file offset " + std::to_string(m.offset) +
                          "; only mappings from offset 0 can be shared" + advice);
  const int fd = open_mapped_file(m);
  if (fd < 0)
    throw InvalidArgument("register: " + range_text(p, bytes) + " lies in a shared mapping of " + m.path +
                          ", but no open file descriptor of it was found in this process" + advice);
  auto r = std::make_shared<MemfdRegion>();
  r->base = r->shadow = reinterpret_cast<char*>(m.start);
  r->length = m.end - m.start;
  r->fd = fd;
  r->id = next_allocation_id();
  r->kind = MemoryKind::host;
  r->origin = Origin::registered;
  index_shareable(r);
  ix.counts[r.get()] = 1;
  return r;
}

void release_registration(const RegionRef& r) {
  if (!r || r->origin != Origin::registered) return;  // a strata allocation: shareable until freed
  Index& ix = index();
  std::lock_guard lk(ix.m);
  auto it = ix.counts.find(r.get());
  if (it == ix.counts.end() || --it->second > 0) return;
  ix.counts.erase(it);
  unindex_shareable(r.get());
}

}  // namespace strata::device
