#include "core/call_check.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>

#include "core/comm_state.hpp"
#include "ground/fnv1a.hpp"
#include "ground/log.hpp"
#include "ground/ranks_text.hpp"

namespace strata {

namespace {

// The same list of messages hashes alike on both ranks.
uint64_t hash_messages(const std::vector<uint64_t>& bytes, uint64_t first_no) {
  uint64_t h = kFnv1aBasis;
  for (size_t i = 0; i < bytes.size(); ++i) h = fnv1a_u64(bytes[i], fnv1a_u64(first_no + i, h));
  return h;
}

bool valid(const CallCheck& c) {
  return c.magic == kCallCheckMagic && (c.kind == 'C' || c.kind == 'P') && c.coll < kNumCollectives &&
         c.type < kNumDataTypes && c.fault < kNumFaults;
}

std::string messages(uint32_t n, uint64_t first, const char* what) {
  if (n == 0) return std::string("no ") + what + "s";
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s") + " (first " + std::to_string(first) + " B)";
}

std::string pair_messages(const CallCheck& c) {
  return messages(c.sends, c.first_send, "send") + " and " + messages(c.recvs, c.first_recv, "receive");
}

const char* kFooterKnown = "; no rank moved data for it, and the communicator stays usable";

}  // namespace

CallCheck collective_check(const Call& k, uint64_t seq) {
  const CollectiveInfo& i = info(k.coll);
  CallCheck c{};
  c.magic = kCallCheckMagic;
  c.kind = 'C';
  c.coll = static_cast<uint8_t>(k.coll);
  c.type = static_cast<uint8_t>(k.type);
  c.op = i.has_op ? static_cast<uint8_t>(k.op) : 0;
  c.fault = static_cast<uint8_t>(k.fault);
  c.root = i.has_root ? k.root : 0;
  c.count = k.count;
  c.seq = seq;
  return c;
}

CallCheck pair_check(const PairOps& ops, Fault fault) {
  CallCheck c{};
  c.magic = kCallCheckMagic;
  c.kind = 'P';
  c.coll = static_cast<uint8_t>(Collective::send);
  c.fault = static_cast<uint8_t>(fault);
  c.sends = static_cast<uint32_t>(ops.sends.size());
  c.recvs = static_cast<uint32_t>(ops.recvs.size());
  c.first_send = ops.sends.empty() ? 0 : ops.sends.front();
  c.first_recv = ops.recvs.empty() ? 0 : ops.recvs.front();
  c.sends_hash = hash_messages(ops.sends, ops.first_send_no);
  c.recvs_hash = hash_messages(ops.recvs, ops.first_recv_no);
  return c;
}

std::string text(const CallCheck& c) {
  if (!valid(c)) return "something that is no call description (a different Strata version?)";
  if (c.kind == 'P') return "send/recv: " + pair_messages(c);
  const auto coll = static_cast<Collective>(c.coll);
  const CollectiveInfo& i = info(coll);
  std::string s = name(coll);
  if (coll == Collective::barrier) return s;
  s += " of " + std::to_string(c.count) + " " + name(static_cast<DataType>(c.type));
  if (i.has_op) s += std::string(" (") + name(static_cast<ReduceOp>(c.op)) + ")";
  if (i.has_root) s += (coll == Collective::reduce ? " to root " : " from root ") + std::to_string(c.root);
  return s;
}

std::optional<Verdict> collective_verdict(const std::vector<CallCheck>& all) {
  // Ranks grouped by what they asked for (their refusals apart), in rank order.
  using Key = std::tuple<bool, char, uint8_t, uint8_t, uint8_t, int32_t, uint64_t, uint64_t>;
  std::map<Key, std::vector<int>> groups;
  std::vector<int> order_of_first;
  std::map<Key, int> first;
  std::vector<int> refused;
  bool everyone_knows = true;
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    const CallCheck& c = all[r];
    const bool ok = valid(c);
    everyone_knows &= ok && c.kind == 'C';
    Key k = ok ? Key{true, c.kind, c.coll, c.type, c.op, c.root, c.count, c.seq} : Key{false, 0, 0, 0, 0, 0, 0, 0};
    if (!first.count(k)) first[k] = r, order_of_first.push_back(r);
    groups[k].push_back(r);
    if (ok && c.fault) refused.push_back(r);
  }
  if (groups.size() == 1 && refused.empty()) return std::nullopt;
  std::string msg = "STRATA_CHECK: ";
  if (groups.size() == 1) {
    msg += "every rank called " + text(all[0]) + " (call #" + std::to_string(all[0].seq) + ")";
  } else {
    msg += "the ranks called different operations: ";
    bool first_group = true;
    for (int r : order_of_first) {
      const CallCheck& c = all[r];
      const Key k = valid(c) ? Key{true, c.kind, c.coll, c.type, c.op, c.root, c.count, c.seq} : Key{false, 0, 0, 0, 0, 0, 0, 0};
      msg += (first_group ? "" : "; ") + ranks_text(groups[k]) + " " + text(c) +
             (valid(c) && c.kind == 'C' ? " (call #" + std::to_string(c.seq) + ")" : "");
      first_group = false;
    }
  }
  for (int r : refused)
    msg += "; rank " + std::to_string(r) + " refused its arguments (" + summary(static_cast<Fault>(all[r].fault)) + ")";
  msg += everyone_knows ? kFooterKnown : "; the communicator can only be destroyed";
  return Verdict{msg, everyone_knows};
}

std::optional<Verdict> pair_verdict(const CallCheck& mine, int me, const CallCheck& theirs, int peer) {
  if (!valid(theirs) || theirs.kind != 'P')
    return Verdict{"STRATA_CHECK: rank " + std::to_string(me) + " posted send/recv with rank " + std::to_string(peer) +
                       ", which called " + text(theirs) + "; the communicator can only be destroyed",
                   false};
  // Both ranks word it the same way: the lower rank first.
  const bool low = me < peer;
  const CallCheck& a = low ? mine : theirs;
  const CallCheck& b = low ? theirs : mine;
  const int ra = low ? me : peer, rb = low ? peer : me;
  std::string msg;
  if (a.sends != b.recvs || a.recvs != b.sends || a.sends_hash != b.recvs_hash || a.recvs_hash != b.sends_hash)
    msg = "rank " + std::to_string(ra) + " posted " + pair_messages(a) + " for rank " + std::to_string(rb) + ", rank " +
          std::to_string(rb) + " posted " + pair_messages(b) + " for rank " + std::to_string(ra) +
          (a.sends == b.recvs && a.recvs == b.sends ? " (sizes, or the messages before, differ)" : "");
  for (const auto& [c, r] : {std::pair{&a, ra}, std::pair{&b, rb}})
    if (c->fault)
      msg += std::string(msg.empty() ? "" : "; ") + "rank " + std::to_string(r) + " refused its arguments (" +
             summary(static_cast<Fault>(c->fault)) + ")";
  if (msg.empty()) return std::nullopt;
  return Verdict{"STRATA_CHECK: " + msg + kFooterKnown, true};
}

// ---- the exchanges ----

void CommState::check_collective(const Call& call) {
  CallCheck mine = collective_check(call, calls++);
  std::vector<CallCheck> all(static_cast<size_t>(nranks));
  all[static_cast<size_t>(rank)] = mine;
  if (nranks > 1) {
    if (!check_plan) {
      CollArgs a{Collective::all_gather, sizeof(CallCheck), 1, 0, rank, nranks, false, sizeof(CallCheck), &hier, false};
      // One message to and from every peer while that is a few connections; beyond, Bruck's
      // log2(n) rounds, so checking does not connect every pair of a large communicator.
      check_plan = std::make_unique<Plan>(build_plan(nranks <= 8 ? Algo::direct : Algo::recursive_doubling, a));
    }
    Call exchange;
    exchange.coll = Collective::all_gather;
    exchange.send = &mine;
    exchange.recv = all.data();
    exchange.count = sizeof(CallCheck);
    exchange.type = DataType::uint8;
    engine->execute(*check_plan, exchange, scratch.get(MemoryKind::host, check_plan->scratch_count), check_slot);
  }
  auto v = collective_verdict(all);
  if (!v) return;
  STRATA_WARN("%s", v->message.c_str());
  if (!v->everyone_knows) engine->control().refuse(Fault::mismatch, call.coll, v->message);
  std::string msg = call.fault != Fault::none ? fault_message(call, nranks) + " (" + v->message + ")" : v->message;
  throw_fault(call.fault != Fault::none ? call.fault : Fault::mismatch, msg);
}

std::vector<P2POp> CommState::check_pairs(const std::vector<P2POp>& ops, Fault own, std::string& disagreement) {
  std::map<int, PairOps> with;  // by peer
  for (const P2POp& p : ops) {
    PairOps& w = with[p.peer];
    (p.is_send ? w.sends : w.recvs).push_back(p.bytes);
  }
  std::map<int, CallCheck> mine, theirs;
  std::vector<P2POp> exchange;
  for (auto& [peer, w] : with) {
    w.first_send_no = sent_to[static_cast<size_t>(peer)];
    w.first_recv_no = received_from[static_cast<size_t>(peer)];
    mine[peer] = pair_check(w, own);
    if (peer == rank) continue;
    exchange.push_back({true, reinterpret_cast<char*>(&mine[peer]), sizeof(CallCheck), peer});
    exchange.push_back({false, reinterpret_cast<char*>(&theirs[peer]), sizeof(CallCheck), peer});
  }
  if (!exchange.empty()) {
    Call sent;
    sent.coll = Collective::send;
    engine->execute(p2p_plan(exchange, rank), sent, nullptr, check_slot);
  }
  std::vector<int> agreed;
  for (auto& [peer, w] : with) {
    // With itself a rank compares its own lists: the same test, mine against mine.
    std::optional<Verdict> v = pair_verdict(mine[peer], rank, peer == rank ? mine[peer] : theirs[peer], peer);
    if (!v) {
      agreed.push_back(peer);
      sent_to[static_cast<size_t>(peer)] += w.sends.size();
      received_from[static_cast<size_t>(peer)] += w.recvs.size();
      continue;
    }
    STRATA_WARN("%s", v->message.c_str());
    if (!v->everyone_knows) {
      engine->control().refuse(Fault::mismatch, Collective::send, v->message);
      throw_fault(Fault::mismatch, v->message);
    }
    disagreement += (disagreement.empty() ? "" : "; ") + v->message;
  }
  std::vector<P2POp> run;
  for (const P2POp& p : ops)
    if (std::find(agreed.begin(), agreed.end(), p.peer) != agreed.end()) run.push_back(p);
  return run;
}

}  // namespace strata
