#include <string>

#include "algorithms/algorithms.hpp"
#include "strata/error.hpp"

namespace strata {

Plan p2p_plan(const std::vector<P2POp>& ops, int rank) {
  Plan plan;
  plan.algo = "p2p";
  plan.new_round();
  std::vector<const P2POp*> self_sends, self_recvs;
  for (const P2POp& p : ops) {
    Ref at{Buf::absolute, reinterpret_cast<uintptr_t>(p.buf)};
    if (p.peer == rank) (p.is_send ? self_sends : self_recvs).push_back(&p);
    else if (p.is_send) plan.send(p.peer, at, p.bytes);
    else plan.recv(p.peer, at, p.bytes);
  }
  if (self_sends.size() != self_recvs.size())
    throw InvalidArgument("group_end: " + std::to_string(self_sends.size()) + " sends to self but " +
                          std::to_string(self_recvs.size()) + " receives from self");
  for (size_t i = 0; i < self_sends.size(); ++i) {
    if (self_sends[i]->bytes != self_recvs[i]->bytes)
      throw InvalidArgument("group_end: a send to self and its matching receive differ in size");
    plan.copy({Buf::absolute, reinterpret_cast<uintptr_t>(self_sends[i]->buf)},
              {Buf::absolute, reinterpret_cast<uintptr_t>(self_recvs[i]->buf)}, self_sends[i]->bytes);
  }
  return plan;
}

}  // namespace strata
