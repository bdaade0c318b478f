// PMIx is optional at build time (STRATA_WITH_PMIX); it is initialised only for the
// exchange and finalised after it, so a program that never calls init_from_env under a
// PMIx launcher never talks to the launcher's server.
#include "core/bootstrap/id_exchange.hpp"
#include "core/bootstrap/unique_id.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#ifdef STRATA_WITH_PMIX
#include <pmix.h>
#endif

namespace strata::bootstrap {

namespace {

constexpr char kFileMagic[] = "strata-root-1";

std::string to_hex(const UniqueId& id) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (uint8_t b : id.bytes) {
    s += kHex[b >> 4];
    s += kHex[b & 0xf];
  }
  return s;
}

// Rank 0 publishes "ok <hex>", or "error <what>" when making the id fails (and then
// rethrows: the other ranks learn of it instead of waiting out the timeout).
template <class Publish>
UniqueId make_and_publish(const MakeId& make, Publish publish) {
  UniqueId id;
  try {
    id = make();
  } catch (const std::exception& e) {
    publish(std::string("error ") + e.what());
    throw;
  }
  publish("ok " + to_hex(id));
  return id;
}

}  // namespace

UniqueId id_from_text(const std::string& published, const std::string& where) {
  UniqueId id;
  if (published.rfind("ok ", 0) == 0 && parse_hex(published.substr(3), id.bytes.data(), id.bytes.size())) return id;
  if (published.rfind("error ", 0) == 0)
    throw PeerError(0, "rank 0 could not make the unique id: " + published.substr(6));
  throw InvalidArgument(where + " holds no unique id");
}

UniqueId share_id_by_file(const std::string& path, const std::string& job_id, int rank, const MakeId& make,
                          net::Deadline deadline) {
  if (rank == 0)
    return make_and_publish(make, [&](const std::string& published) {
      // The id holds the job's secret: only this user may read it.
      std::string tmp = path + ".tmp." + std::to_string(::getpid());
      std::string text = std::string(kFileMagic) + '\n' + job_id + '\n' + published + '\n';
      int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      bool written = fd >= 0 && ::fchmod(fd, 0600) == 0 &&
                     ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
      if (fd >= 0) ::close(fd);
      if (!written) {
        ::unlink(tmp.c_str());
        throw SystemError("cannot write the root file " + tmp + " (STRATA_ROOT_FILE)");
      }
      if (std::rename(tmp.c_str(), path.c_str()) != 0)
        throw SystemError("cannot create the root file " + path + " (STRATA_ROOT_FILE)");
    });
  auto pause = std::chrono::milliseconds(5);
  for (;;) {
    std::ifstream in(path);
    std::string magic, job, published;
    if (in && std::getline(in, magic) && std::getline(in, job) && std::getline(in, published) &&
        magic == kFileMagic && job == job_id)
      return id_from_text(published, path);
    if (net::Clock::now() > deadline)
      throw TimeoutError(0, "rank 0 did not write its unique id to " + path +
                                (job_id.empty() ? "" : " for job " + job_id) + " within STRATA_TIMEOUT");
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }
}

// ---- PMIx ----

#ifdef STRATA_WITH_PMIX

namespace {

std::string pmix_error(const char* what, pmix_status_t rc) {
  return std::string("PMIx: ") + what + " failed: " + PMIx_Error_string(rc);
}

// PMIx_Init on construction, PMIx_Finalize on destruction (PMIx counts nested inits).
class Session {
 public:
  Session() {
    pmix_status_t rc = PMIx_Init(&me_, nullptr, 0);
    if (rc != PMIX_SUCCESS) throw SystemError(pmix_error("PMIx_Init (is the launcher's PMIx server running?)", rc));
  }
  ~Session() { PMIx_Finalize(nullptr, 0); }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  const pmix_proc_t& me() const { return me_; }
  pmix_proc_t rank(pmix_rank_t r) const {
    pmix_proc_t p;
    PMIX_LOAD_PROCID(&p, me_.nspace, r);
    return p;
  }

 private:
  pmix_proc_t me_;
};

}  // namespace

bool pmix_built() { return true; }

UniqueId share_id_by_pmix(int rank, const MakeId& make, double timeout_s) {
  Session s;
  // Each exchange in a process has its own key: PMIx keeps values, and a second
  // communicator must not read the first one's id.
  static std::atomic<int> exchanges{0};
  const std::string key = "strata.unique_id." + std::to_string(exchanges++);
  auto fence = [&] {
    pmix_info_t info[2];
    bool collect = true;
    int timeout = static_cast<int>(timeout_s + 0.999);
    PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &timeout, PMIX_INT);
    pmix_proc_t all = s.rank(PMIX_RANK_WILDCARD);
    pmix_status_t rc = PMIx_Fence(&all, 1, info, 2);
    PMIX_INFO_DESTRUCT(&info[0]);
    PMIX_INFO_DESTRUCT(&info[1]);
    if (rc == PMIX_ERR_TIMEOUT) throw TimeoutError(-1, "PMIx: not every rank reached init_from_env within STRATA_TIMEOUT");
    if (rc != PMIX_SUCCESS) throw SystemError(pmix_error("the fence after publishing the unique id", rc));
  };
  if (rank == 0)
    return make_and_publish(make, [&](const std::string& published) {
      pmix_value_t v;
      PMIX_VALUE_LOAD(&v, published.c_str(), PMIX_STRING);
      pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key.c_str(), &v);
      PMIX_VALUE_DESTRUCT(&v);
      if (rc == PMIX_SUCCESS) rc = PMIx_Commit();
      if (rc != PMIX_SUCCESS) throw SystemError(pmix_error("publishing the unique id", rc));
      fence();
    });
  fence();
  pmix_proc_t zero = s.rank(0);
  pmix_value_t* v = nullptr;
  pmix_status_t rc = PMIx_Get(&zero, key.c_str(), nullptr, 0, &v);
  if (rc != PMIX_SUCCESS || !v || v->type != PMIX_STRING) throw SystemError(pmix_error("reading rank 0's unique id", rc));
  std::string published = v->data.string;
  PMIX_VALUE_RELEASE(v);
  return id_from_text(published, "PMIx key " + key);
}

int pmix_job_size() {
  Session s;
  pmix_proc_t all = s.rank(PMIX_RANK_WILDCARD);
  pmix_value_t* v = nullptr;
  pmix_status_t rc = PMIx_Get(&all, PMIX_JOB_SIZE, nullptr, 0, &v);
  if (rc != PMIX_SUCCESS || !v || v->type != PMIX_UINT32) throw SystemError(pmix_error("reading the job size", rc));
  int size = static_cast<int>(v->data.uint32);
  PMIX_VALUE_RELEASE(v);
  return size;
}

#else

bool pmix_built() { return false; }

UniqueId share_id_by_pmix(int, const MakeId&, double) {
  throw InvalidUsage("this libstrata was built without PMIx (install libpmix-dev and rebuild)");
}

int pmix_job_size() { return share_id_by_pmix(0, nullptr, 0), 0; }

#endif

}  // namespace strata::bootstrap
