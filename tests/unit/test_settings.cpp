// The settings table: parsing, refusals, the misspelling hint, and docs/environment.md
// documenting exactly the table's variables.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <unistd.h>

#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "ground/settings.hpp"
#include "strata/error.hpp"
#include "strata/strata.hpp"

using namespace strata;

namespace {
struct Env {  // sets a variable for one scope, then restores what was there
  const char* name;
  std::optional<std::string> before;
  Env(const char* n, const char* v) : name(n) {
    if (const char* old = getenv(n)) before = old;
    setenv(n, v, 1);
  }
  Env(const Env&) = delete;
  ~Env() {
    if (before) setenv(name, before->c_str(), 1);
    else unsetenv(name);
  }
};
std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Settings, UnsetGivesTheTableDefault) {
  unsetenv("STRATA_TCP_NSOCKS");
  unsetenv("STRATA_TIMEOUT");
  EXPECT_EQ(settings::integer("STRATA_TCP_NSOCKS"), 2);
  EXPECT_EQ(settings::number("STRATA_TIMEOUT"), 300.0);
  EXPECT_EQ(settings::integer("STRATA_SHM_RING_BYTES"), 4 << 20);
  EXPECT_EQ(settings::text("STRATA_TRANSPORT"), "");
}

TEST(Settings, IntegersTakeSizeSuffixesAndRefuseWhatIsOutOfRange) {
  {
    Env e("STRATA_SHM_RING_BYTES", "8M");
    EXPECT_EQ(settings::integer("STRATA_SHM_RING_BYTES"), 8 << 20);
  }
  {
    Env e("STRATA_SHM_RING_BYTES", "64k");
    EXPECT_EQ(settings::integer("STRATA_SHM_RING_BYTES"), 64 << 10);
  }
  {
    Env e("STRATA_TCP_NSOCKS", "17");
    EXPECT_EQ(message_of([] { settings::integer("STRATA_TCP_NSOCKS"); }), "STRATA_TCP_NSOCKS=17 is not an integer in [1, 16]");
  }
  {
    // Scaled past what a 64-bit integer holds: refused, not wrapped into range.
    Env e("STRATA_SHM_ZEROCOPY_BYTES", "9007199254740993G");
    EXPECT_NE(message_of([] { settings::integer("STRATA_SHM_ZEROCOPY_BYTES"); }), "");
  }
  {
    Env e("STRATA_TCP_NSOCKS", "2x");
    EXPECT_NE(message_of([] { settings::integer("STRATA_TCP_NSOCKS"); }), "");
  }
  {
    Env e("STRATA_TIMEOUT", "abc");
    EXPECT_EQ(message_of([] { settings::number("STRATA_TIMEOUT"); }), "STRATA_TIMEOUT=abc is not a number in [0.100000, 10000000]");
  }
}

TEST(Settings, ChoicesRefuseOtherValuesListingTheAllowedOnes) {
  Env e("STRATA_TRANSPORT", "udp");
  EXPECT_EQ(message_of([] { settings::text("STRATA_TRANSPORT"); }), "STRATA_TRANSPORT=udp is not one of: shm, tcp, ucx, ibverbs");
  Env f("STRATA_UCX_PUTS", "1");
  EXPECT_EQ(settings::text("STRATA_UCX_PUTS"), "1");
}

TEST(Settings, ConfigReadsTheTable) {
  Env a("STRATA_CHUNK_BYTES", "1M");
  Env b("STRATA_SHM_RING_BYTES", "5000");  // rounded down to whole 64-byte lines
  Config c = Config::from_env();
  EXPECT_EQ(c.chunk_bytes, size_t{1} << 20);
  EXPECT_TRUE(c.chunk_bytes_set);
  EXPECT_EQ(c.shm_ring_bytes, 4992u);
}

TEST(Settings, AMisspelledVariableIsMatchedToTheClosestKnownOne) {
  EXPECT_EQ(settings::closest("STRATA_TIMOUT"), "STRATA_TIMEOUT");
  EXPECT_EQ(settings::closest("STRATA_TRANSPROT"), "STRATA_TRANSPORT");
  EXPECT_EQ(settings::closest("STRATA_SHM_RING_BYTE"), "STRATA_SHM_RING_BYTES");
  EXPECT_THROW(settings::find("STRATA_NOT_DECLARED"), InternalError);
}

TEST(Settings, EveryVariableIsDeclaredOnceWithItsDefaultInRange) {
  std::set<std::string> names;
  for (const auto& s : settings::all()) {
    EXPECT_TRUE(names.insert(s.name).second) << s.name << " declared twice";
    EXPECT_EQ(std::string(s.name).rfind("STRATA_", 0), 0u) << s.name;
    EXPECT_TRUE(s.help && *s.help) << s.name;
    if (s.type != settings::Type::text) {
      EXPECT_TRUE(s.lo <= s.fallback && s.fallback <= s.hi) << s.name;
    }
  }
}

// docs/environment.md's tables name exactly the variables of the settings table.
TEST(Settings, TheDocsListExactlyTheTable) {
  std::ifstream in(STRATA_ENVIRONMENT_DOC);
  ASSERT_TRUE(in) << STRATA_ENVIRONMENT_DOC;
  std::set<std::string> documented;
  const std::regex var("STRATA_[A-Z0-9_]+");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| `STRATA_", 0) != 0) continue;  // a table row naming variables
    std::string first_cell = line.substr(0, line.find('|', 1));
    for (std::sregex_iterator it(first_cell.begin(), first_cell.end(), var), end; it != end; ++it)
      documented.insert(it->str());
  }
  std::set<std::string> declared;
  for (const auto& s : settings::all()) declared.insert(s.name);
  for (const auto& d : declared) EXPECT_TRUE(documented.count(d)) << d << " is in the settings table but not in docs/environment.md";
  for (const auto& d : documented) EXPECT_TRUE(declared.count(d)) << d << " is documented but not in the settings table";
}

// ---- every declared setting, malformed, as a user sets it ---------------------------
//
// A one-rank job started as strata-run starts one (STRATA_RANK and the others set, rank 0's
// id passed through STRATA_ROOT_FILE), created with one setting malformed: creation must
// fail with an error naming the variable (docs/environment.md). A setting added to the
// table without a malformed value here fails the coverage check below.

namespace {

struct Malformed {
  const char* value;
  ErrorKind kind = ErrorKind::invalid_argument;
};

const std::map<std::string, Malformed>& malformed_values() {
  static const std::map<std::string, Malformed> m = {
      {"STRATA_RANK", {"zero"}},
      {"STRATA_WORLD_SIZE", {"0"}},
      {"STRATA_LOCAL_RANK", {"1.5"}},
      {"STRATA_LOCAL_SIZE", {"2x"}},
      {"STRATA_ROOT", {"no-port-here"}},
      {"STRATA_ROOT_FILE", {"/nonexistent-directory/root", ErrorKind::system}},
      {"STRATA_ROOT_PORT", {"65536"}},
      {"STRATA_SECRET", {"not-hex"}},
      {"STRATA_SOCKET_IFNAME", {"no-such-interface0"}},
      {"STRATA_DEBUG", {"garbage"}},
      {"STRATA_REDUCE_ISA", {"foo"}},
      {"STRATA_DEVICE", {"tpu"}},
      {"STRATA_EMULATED_DELAY_US", {"1000001"}},
      {"STRATA_EMULATED_CUDA_RULES", {"2"}},
      {"STRATA_EMULATED_LOCK_WAIT", {"soon"}},
      {"STRATA_HOST", {nullptr}},  // too long: filled in below
      {"STRATA_TIMEOUT", {"abc"}},
      {"STRATA_CHECK", {"yes"}},
      {"STRATA_TRANSPORT", {"udp"}},
      {"STRATA_ALGO", {"bubble"}},
      {"STRATA_CHUNK_BYTES", {"32"}},
      {"STRATA_HIERARCHY", {"node"}},
      {"STRATA_LINK_MODEL", {"node:fast:6GB"}},
      {"STRATA_SHM_RING_BYTES", {"4Q"}},
      {"STRATA_SHM_RANK_BYTES", {"12MB"}},
      {"STRATA_SHM_STREAM_BYTES", {"-1"}},
      {"STRATA_SHM_ZEROCOPY_BYTES", {"64KiB?"}},
      {"STRATA_SHM_ZEROCOPY_PUSH", {"2"}},
      {"STRATA_TCP_NSOCKS", {"0"}},
      {"STRATA_TCP_STAGING_BYTES", {"1M1"}},
      {"STRATA_UCX_CHUNK_BYTES", {"big"}},
      {"STRATA_UCX_STAGING_CHUNKS", {"65"}},
      {"STRATA_UCX_PUT_CHUNK_BYTES", {"0x100"}},
      {"STRATA_UCX_PUTS", {"sometimes"}},
      {"STRATA_IPC_CACHE_ENTRIES", {"0"}},
      {"STRATA_STAGING_CHUNK_BYTES", {"1000"}},  // in range, not a multiple of 64
      {"STRATA_STAGING_SLOTS", {"1"}},
      {"STRATA_IB_HCA", {"mlx5_0:port"}},
      {"STRATA_IB_GID_INDEX", {"-2"}},
      {"STRATA_IB_CHUNK_BYTES", {"128M"}},
      {"STRATA_IB_SLOTS", {"1"}},
      {"STRATA_IB_TIMEOUT", {"32"}},
      {"STRATA_IB_RETRY_CNT", {"8"}},
      {"STRATA_IB_MAX_NICS", {"17"}},
  };
  return m;
}

// Read where they are used, not by a communicator: STRATA_TOPO_FILE by the topology
// loader (a file it cannot load is an error naming it, tests/topology), STRATA_PYTHON
// by the tests (any command), STRATA_TRAIN_TEST_DEVICE by the trainer's device kernel
// tests (a device they cannot have fails them naming it).
const std::set<std::string> kReadElsewhere = {"STRATA_TOPO_FILE", "STRATA_PYTHON", "STRATA_TRAIN_TEST_DEVICE"};

// The environment of rank 0 of a one-rank strata-run job.
struct OneRankJob {
  std::string root_file = "/tmp/strata-test-settings-" + std::to_string(getpid());
  std::vector<std::unique_ptr<Env>> vars;
  OneRankJob() {
    for (const auto& s : settings::all()) unsetenv(s.name);
    for (auto [name, value] : {std::pair{"STRATA_RANK", "0"}, {"STRATA_WORLD_SIZE", "1"}, {"STRATA_LOCAL_RANK", "0"},
                               {"STRATA_LOCAL_SIZE", "1"}, {"STRATA_ROOT_FILE", root_file.c_str()}})
      vars.push_back(std::make_unique<Env>(name, value));
  }
  ~OneRankJob() { ::unlink(root_file.c_str()); }
  // The error creating the communicator throws, or nullopt when it succeeds.
  std::optional<Error> create() {
    try {
      Comm c = Comm::init_from_env();
      c.destroy();
    } catch (const Error& e) {
      return e;
    }
    return std::nullopt;
  }
};

}  // namespace

TEST(SettingRefusals, EveryDeclaredSettingHasAMalformedValueHere) {
  for (const auto& s : settings::all())
    EXPECT_TRUE(malformed_values().count(s.name) || kReadElsewhere.count(s.name))
        << s.name << ": add a malformed value to this test";
}

TEST(SettingRefusals, CreationFailsNamingEachMalformedSetting) {
  OneRankJob job;
  auto control = job.create();
  ASSERT_FALSE(control) << "the one-rank job fails with every setting well formed: " << control->what();
  const std::string long_host(200, 'h');
  for (const auto& [name, bad] : malformed_values()) {
    const std::string value = bad.value ? bad.value : long_host;
    Env e(name.c_str(), value.c_str());
    auto err = job.create();
    if (!err) {
      ADD_FAILURE() << name << "=" << value << " was accepted";
      continue;
    }
    EXPECT_NE(std::string(err->what()).find(name), std::string::npos) << name << ": " << err->what();
    EXPECT_EQ(err->kind(), bad.kind) << name << ": " << err->what();
  }
}

TEST(SettingRefusals, ChoicesMatchAnyCaseAndReadBackAsDeclared) {
  Env a("STRATA_TRANSPORT", "TCP");
  EXPECT_EQ(settings::text("STRATA_TRANSPORT"), "tcp");
  Env b("STRATA_DEBUG", "info");
  EXPECT_EQ(settings::text("STRATA_DEBUG"), "INFO");
  EXPECT_EQ(settings::choose("STRATA_ALGO", "Ring", "ring|tree"), "ring");
  EXPECT_EQ(message_of([] { settings::choose("STRATA_ALGO", "rings", "ring|tree"); }),
            "STRATA_ALGO=rings is not one of: ring, tree");
}
