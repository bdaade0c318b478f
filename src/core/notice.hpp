// The messages on a communicator's control sockets (one per connected pair of ranks):
// fixed 8 bytes, so a reader never sees half of one, except a setup frame, whose payload
// follows it. The control channel (core/control_channel.hpp) sends and reads those of a
// running communicator; the connector (core/connector.hpp) the setup frames of a pair's
// connection; Comm::shrink (core/shrink.cpp) those of its agreement on who is alive.
#pragma once

#include <cstdint>

namespace strata {

struct Notice {
  char kind;       // see below
  uint8_t why;     // 'R': the Fault; shrink notices: the epoch; 'S': the setup step
  uint8_t coll;    // 'R': the Collective refused; 'J', 'L': low byte of a port; 'S': the memory kind
  uint8_t flags;   // 'A': whether the origin was found stopped; 'J', 'L': high byte of a port; 'Q': kWaiting
  int32_t origin;  // 'A', 'R': the rank whose failure or refusal caused it (-1 unknown); 'Q': the rank the
                   // answerer waits on (-1: none); 'S': the payload's length; shrink: see below
};
static_assert(sizeof(Notice) == 8);

// A running communicator:
//   'B' goodbye (destroy), 'A' abort, 'R' refused arguments, 'P' liveness probe, 'Q' its answer,
//   then 'W': what the answerer is doing (payload: text, its length in origin).
// A pair's connection (core/connector.hpp), 'S' with its step in `why`:
//   'O' the sender's transport offer (payload: a TransportOffer), sent once by each end;
//   'I' the connection info of the row carrying memory kind `coll` (payload: the row's bytes);
//   'T' the sender has made its link for kind `coll` (payload: one byte its row gives the peer).
// A shrink (core/shrink_agreement.hpp), each with its epoch in `why`:
//   'J' join: the port of the sender's new listener; origin: the rank whose failure it knows of
//   'D' dead: origin is a rank the sender found dead (its connection closed, or silent too long)
//   'K', 'L', 'M' a decision: a 'K' per rank left out (origin), an 'L' per member (origin, its
//       port), then 'M' (origin: how many 'K' came before it)
//   'C' created: the sender has connected the new communicator
inline bool is_shrink_notice(char kind) {
  return kind == 'J' || kind == 'D' || kind == 'K' || kind == 'L' || kind == 'M' || kind == 'C';
}

// 'Q': the answerer is itself waiting in a call (origin names whom on, when it knows).
inline constexpr uint8_t kWaiting = 1;
// A setup frame's payload is at most this long: anything longer is not one of ours.
inline constexpr int32_t kMaxSetupPayload = 1 << 20;
// The frames that carry a payload (its length in origin).
inline bool has_payload(char kind) { return kind == 'S' || kind == 'W'; }

inline Notice shrink_notice(char kind, int epoch, int32_t origin, uint16_t port = 0) {
  return {kind, static_cast<uint8_t>(epoch), static_cast<uint8_t>(port & 0xff), static_cast<uint8_t>(port >> 8), origin};
}
inline uint16_t port_of(const Notice& n) { return static_cast<uint16_t>(n.coll | (n.flags << 8)); }

}  // namespace strata
