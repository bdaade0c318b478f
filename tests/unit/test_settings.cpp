// The settings table: parsing, refusals, the misspelling hint, and docs/environment.md
// documenting exactly the table's variables.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "ground/settings.hpp"
#include "strata/error.hpp"

using namespace strata;

namespace {
struct Env {  // sets a variable for one test
  const char* name;
  Env(const char* n, const char* v) : name(n) { setenv(n, v, 1); }
  ~Env() { unsetenv(name); }
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
    Env e("STRATA_SHM_DIRECT_BYTES", "9007199254740993G");
    EXPECT_NE(message_of([] { settings::integer("STRATA_SHM_DIRECT_BYTES"); }), "");
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
