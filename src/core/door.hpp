// The door where newcomers wait to join a communicator (Comm::open_door, core/grow.cpp):
// what a newcomer sends first, for the tests that speak the protocol themselves.
#pragma once

#include <cstdint>

namespace strata {

// A newcomer's hello (net::Hello) carries this tag -- the bootstrap's join has tag 0 -- and
// its key in the rank field; its description (bootstrap::RankInfo) follows. Rank 0 answers,
// when a grow takes it in, with the grown communicator's size, tag and its rank, then the
// table of every rank's description.
inline constexpr uint64_t kDoorTag = 0x646f6f72ull;  // "door"

}  // namespace strata
