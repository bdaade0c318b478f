// STRATA_CHECK=1: before each operation the ranks exchange what they were asked to do, and
// a disagreement (or one rank's refused arguments) fails the call on every rank with a
// message naming which ranks passed what, before any data moves. The descriptions and
// verdicts are pure functions here; CommState runs the exchanges (core/call_check.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/algorithms.hpp"
#include "ground/call.hpp"

namespace strata {

// What one rank was asked to do, as exchanged: a collective's description ('C'), or a
// summary of the send/recv messages between this rank and one peer in one operation ('P').
// Both kinds have one size, so ranks that disagree on which kind of operation they are in
// still exchange whole messages and stay in step.
struct CallCheck {
  uint32_t magic;  // kCallCheckMagic
  char kind;       // 'C' collective, 'P' pair
  uint8_t coll, type, op;
  uint8_t fault;   // this rank's own Fault for the call
  uint8_t pad[3];
  int32_t root;    // 'C': the root where the collective takes one, else 0
  uint64_t count;  // 'C'
  uint64_t seq;    // 'C': collectives run on this communicator before this one
  // 'P': this rank's messages to and from the peer in this operation; the first one's
  // size, and a hash over (number of the message between the pair, bytes) of each.
  uint32_t sends, recvs;
  uint64_t first_send, first_recv;
  uint64_t sends_hash, recvs_hash;
};
static_assert(sizeof(CallCheck) == 72);
inline constexpr uint32_t kCallCheckMagic = 0x314b4353;  // "SCK1"

CallCheck collective_check(const Call& k, uint64_t seq);

// One rank's send/recv messages with one peer in one operation, in posting order.
struct PairOps {
  std::vector<uint64_t> sends, recvs;  // bytes
  uint64_t first_send_no = 0, first_recv_no = 0;  // messages sent to / received from the peer before these
};
CallCheck pair_check(const PairOps& ops, Fault fault);

// "all_reduce of 1024 float32 (sum)", "3 sends (first 4096 B) and 1 receive (first 8 B)".
std::string text(const CallCheck& c);

struct Verdict {
  std::string message;
  // Every rank reached the same verdict from the same descriptions (all were collectives),
  // so each fails the call on its own and the communicator stays usable; otherwise the
  // ranks that saw the disagreement must tell the others.
  bool everyone_knows;
};

// The descriptions of every rank (indexed by rank) of one collective; none when they agree
// and no rank refused its arguments.
std::optional<Verdict> collective_verdict(const std::vector<CallCheck>& all);
// This rank's and a peer's summaries of their messages to each other; symmetric, so both
// reach the same verdict.
std::optional<Verdict> pair_verdict(const CallCheck& mine, int me, const CallCheck& theirs, int peer);

}  // namespace strata
