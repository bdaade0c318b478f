// strata-test-worker's tests beyond the collective matrix: point-to-point, groups, several
// async operations at once, barrier and split. Each checks against values it computes
// itself and reports through the Reporter.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "worker_cases.hpp"

namespace strata_test {

using namespace strata;

namespace {

// Device mode: the worker's stream, and point-to-point calls on a buffer's device twin on
// it (host mode: the blocking calls on the buffer itself).
device::Stream stream() { return device_mode().stream; }
void send(Comm& c, Buf& b, size_t count, DataType t, int peer) {
  if (device_mode().on) c.send(b.on_device(b.data()), count, t, peer, stream());
  else c.send(b.data(), count, t, peer);
}
void recv(Comm& c, Buf& b, size_t count, DataType t, int peer) {
  if (device_mode().on) c.recv(b.on_device(b.data()), count, t, peer, stream());
  else c.recv(b.data(), count, t, peer);
}
// Device mode: buffers in before the calls and out after them, all on the worker's stream.
void upload(std::vector<Buf*> bufs) {
  for (Buf* b : bufs) b->to_device(stream());
}
void download_and_wait(std::vector<Buf*> bufs) {
  if (!device_mode().on) return;
  for (Buf* b : bufs) b->to_host(stream());
  device::stream_synchronize(stream());
}
// The form a test that wants a call in flight uses: _async, or on a stream in device mode.
Issue in_flight() { return device_mode().on ? Issue::stream : Issue::async; }

// Blocking send/recv around a ring; even ranks send first, odd ranks receive first.
void test_p2p_ring(Comm& comm, Reporter& rep, const std::vector<DataType>& types, uint64_t seed) {
  int r = comm.rank(), n = comm.size();
  if (n < 2) return;
  int next = (r + 1) % n, prev = (r - 1 + n) % n;
  for (DataType t : types) {
    size_t sz = size_of(t);
    for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(1001), 4096 / sz + 1, size_t(65537)}) {
      uint64_t s = mix64(seed + count * 131 + static_cast<int>(t));
      std::string desc = std::string("send/recv ring type=") + name(t) + " count=" + std::to_string(count);
      Buf sb(count * sz), rb(count * sz);
      fill_raw(sb, msg_base(s, r, next, 0));
      rb.fill_sentinel();
      guarded(rep, desc, [&] {
        upload({&sb, &rb});
        if (r % 2 == 0) {
          send(comm, sb, count, t, next);
          recv(comm, rb, count, t, prev);
        } else {
          recv(comm, rb, count, t, prev);
          send(comm, sb, count, t, next);
        }
        download_and_wait({&sb, &rb});
      });
      std::string err = check_raw(rb, msg_base(s, prev, r, 0), sz, "received data");
      if (err.empty()) err = check_raw(sb, msg_base(s, r, next, 0), sz, "send buffer (must not change)");
      rep.result(desc, err);
    }
  }
}

// Many async sends and receives outstanding at once, several messages per peer pair
// (matched in posting order), waited in reverse order. Operations on a communicator run
// one at a time in issue order, so a send larger than the transport can buffer completes
// only once the peer runs the matching recv: in round k (send to r+k, recv from r-k) one
// rank of each cycle of the shift (r < gcd(n, k)) receives first, the others send first.
void test_p2p_async(Comm& comm, Reporter& rep, uint64_t seed) {
  int r = comm.rank(), n = comm.size();
  if (n < 2) return;
  const DataType kTypes[] = {DataType::float32, DataType::int8, DataType::float64, DataType::bfloat16};
  const size_t kCounts[] = {1001, 0, 65537, 3};
  struct Msg {
    Buf buf;
    uint64_t base;
    size_t elem;
    std::string what;
  };
  std::vector<Msg> sends, recvs;
  std::vector<Request> reqs;
  std::string desc = "send_async/recv_async to every peer, 4 messages each, nranks=" + std::to_string(n);
  guarded(rep, desc, [&] {
    for (int k = 1; k < n; ++k) {
      int dst = (r + k) % n, src = (r - k + n) % n;
      const bool recv_first = r < std::gcd(n, k);
      for (int m = 0; m < 4; ++m) {
        DataType t = kTypes[(m + k) % 4];
        size_t count = kCounts[m], sz = size_of(t);
        Msg s{Buf(count * sz), msg_base(seed, r, dst, m), sz, ""};
        fill_raw(s.buf, s.base);
        Msg rv{Buf(count * sz), msg_base(seed, src, r, m), sz,
               "message " + std::to_string(m) + " from rank " + std::to_string(src)};
        rv.buf.fill_sentinel();
        if (recv_first) reqs.push_back(comm.recv_async(rv.buf.data(), count, t, src));
        reqs.push_back(comm.send_async(s.buf.data(), count, t, dst));
        if (!recv_first) reqs.push_back(comm.recv_async(rv.buf.data(), count, t, src));
        sends.push_back(std::move(s));
        recvs.push_back(std::move(rv));
      }
    }
    // (an empty Request means "already complete"; the library returns one for count 0)
    for (size_t i = 0; i < reqs.size(); ++i)
      if (!reqs[i].valid() && kCounts[(i / 2) % 4] != 0)
        throw InternalError("an _async call with count > 0 outside a group returned an empty Request");
    for (size_t i = reqs.size(); i-- > 0;) reqs[i].wait();
  });
  std::string err;
  for (auto& m : recvs)
    if (err.empty()) err = check_raw(m.buf, m.base, m.elem, m.what.c_str());
  for (auto& m : sends)
    if (err.empty()) err = check_raw(m.buf, m.base, m.elem, "send buffer (must not change)");
  rep.result(desc, err);
}

// All-to-all exchange through grouped send/recv, including to and from self.
void test_group_p2p(Comm& comm, Reporter& rep, uint64_t seed) {
  int r = comm.rank(), n = comm.size();
  const DataType kTypes[] = {DataType::float32, DataType::int8, DataType::float64, DataType::uint64};
  int variant = 0;
  for (DataType t : kTypes) {
    for (size_t count : {size_t(0), size_t(1), size_t(1001), size_t(65537)}) {
      ++variant;
      int v = variant % 4;
      size_t sz = size_of(t);
      std::vector<Buf> sb, rb;
      for (int q = 0; q < n; ++q) {
        sb.emplace_back(count * sz);
        fill_raw(sb.back(), msg_base(seed + variant, r, q, 0));
        rb.emplace_back(count * sz);
        rb.back().fill_sentinel();
      }
      static const char* kv[] = {"plain", "nested groups + _async forms", "group_end_async",
                                 "recvs first, reverse order"};
      std::string desc = std::string("grouped send/recv all-to-all incl. self (") + kv[v] +
                         ") type=" + name(t) + " count=" + std::to_string(count) +
                         " nranks=" + std::to_string(n);
      std::string err;
      std::vector<Buf*> all;
      for (int q = 0; q < n; ++q) all.push_back(&sb[q]), all.push_back(&rb[q]);
      // In device mode the _async forms have no stream: that group is ordered on the
      // default stream and the worker's at once.
      auto dev = [](Buf& b) { return b.on_device(b.data()); };
      guarded(rep, desc, [&] {
        upload(all);
        if (v == 0) {
          comm.group_start();
          for (int q = 0; q < n; ++q) {
            send(comm, sb[q], count, t, q);
            recv(comm, rb[q], count, t, q);
          }
          comm.group_end();
        } else if (v == 1) {
          comm.group_start();
          comm.group_start();
          for (int q = 0; q < n; ++q) {
            Request x = comm.send_async(dev(sb[q]), count, t, q);
            if (x.valid()) err = "send_async inside a group returned a non-empty Request";
          }
          comm.group_end();
          for (int q = 0; q < n; ++q) {
            Request x = comm.recv_async(dev(rb[q]), count, t, q);
            if (x.valid()) err = "recv_async inside a group returned a non-empty Request";
          }
          comm.group_end();
        } else if (v == 2) {
          comm.group_start();
          for (int q = 0; q < n; ++q) {
            recv(comm, rb[q], count, t, q);
            send(comm, sb[q], count, t, q);
          }
          Request x = comm.group_end_async();
          download_and_wait(all);
          x.wait();
        } else {
          comm.group_start();
          for (int q = n - 1; q >= 0; --q) recv(comm, rb[q], count, t, q);
          for (int q = n - 1; q >= 0; --q) send(comm, sb[q], count, t, q);
          comm.group_end();
        }
        if (v != 2) download_and_wait(all);
      });
      for (int q = 0; q < n && err.empty(); ++q)
        err = check_raw(rb[q], msg_base(seed + variant, q, r, 0), sz,
                        ("data received from rank " + std::to_string(q)).c_str());
      rep.result(desc, err);
    }
  }
}

// Several different async collectives outstanding at once, waited in reverse order.
void test_async_mix(Comm& comm, Reporter& rep, uint64_t seed) {
  int n = comm.size();
  std::vector<std::unique_ptr<CaseBase>> cs;
  cs.push_back(make_case(comm, Collective::all_reduce, DataType::float32, ReduceOp::sum, 1001, false, -1, seed + 1));
  cs.push_back(make_case(comm, Collective::all_gather, DataType::int32, ReduceOp::sum, 65537, false, -1, seed + 2));
  cs.push_back(make_case(comm, Collective::broadcast, DataType::float64, ReduceOp::sum, 4097, false, n - 1, seed + 3));
  cs.push_back(make_case(comm, Collective::reduce_scatter, DataType::bfloat16, ReduceOp::sum, 1001, true, -1, seed + 4));
  cs.push_back(make_case(comm, Collective::all_to_all, DataType::uint8, ReduceOp::sum, 1001, false, -1, seed + 5));
  cs.push_back(make_case(comm, Collective::reduce, DataType::int64, ReduceOp::max, 333, false, 0, seed + 6));
  cs.push_back(make_case(comm, Collective::all_reduce, DataType::float16, ReduceOp::avg, 7, true, -1, seed + 7));
  cs.push_back(make_case(comm, Collective::all_reduce, DataType::int32, ReduceOp::prod, 65537, false, -1, seed + 8));
  std::string desc = "8 async collectives + barrier_async outstanding at once, nranks=" + std::to_string(n);
  for (auto& c : cs) c->prepare();
  guarded(rep, desc, [&] {
    std::vector<Request> reqs;
    for (size_t i = 0; i < cs.size(); ++i) {
      reqs.push_back(start_case(comm, *cs[i], in_flight(), stream()));
      if (i == 3) reqs.push_back(device_mode().on ? comm.barrier(stream()) : comm.barrier_async());
    }
    for (size_t i = reqs.size(); i-- > 0;) reqs[i].wait();
    finish_case(in_flight(), stream());
  });
  std::string err;
  for (auto& c : cs) {
    std::string e = c->check();
    if (!e.empty() && err.empty()) err = c->desc + ": " + e;
  }
  rep.result(desc, err);

  // test() polling until done
  auto c = make_case(comm, Collective::all_reduce, DataType::float32, ReduceOp::sum, 65537, false, -1, seed + 9);
  c->prepare();
  std::string d2 = "Request::test() polling on all_reduce_async, nranks=" + std::to_string(n);
  guarded(rep, d2, [&] {
    Request q = start_case(comm, *c, in_flight(), stream());
    double t0 = mono_s();
    while (!q.test()) {
      if (mono_s() - t0 > 120) throw InternalError("test() never returned true");
      std::this_thread::yield();
    }
    finish_case(in_flight(), stream());
  });
  rep.result(d2, c->check());
}

// An _async call must return before the operation can complete: the last rank joins late.
void test_async_returns_at_once(Comm& comm, Reporter& rep, uint64_t seed) {
  int r = comm.rank(), n = comm.size();
  if (n < 2) return;
  auto c = make_case(comm, Collective::all_reduce, DataType::int32, ReduceOp::sum, 1001, false, -1, seed);
  c->prepare();
  std::string desc = "all_reduce_async returns before a late rank joins, nranks=" + std::to_string(n);
  std::string err;
  guarded(rep, desc, [&] {
    if (r == n - 1) std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    double t0 = mono_s();
    Request q = start_case(comm, *c, in_flight(), stream());
    double dt = mono_s() - t0;
    if (r != n - 1) {
      if (dt > 0.5) err = "all_reduce_async took " + std::to_string(dt) + " s to return";
      else if (q.test()) err = "test() reported completion although the last rank had not joined";
    }
    q.wait();
    finish_case(in_flight(), stream());
  });
  std::string e = c->check();
  rep.result(desc, err.empty() ? e : err);
}

// After a barrier no rank may leave before the last one entered (CLOCK_MONOTONIC is
// shared by all processes on the host).
void test_barrier(Comm& comm, Reporter& rep) {
  int r = comm.rank(), n = comm.size();
  for (int it = 0; it < 4; ++it) {
    std::string desc = std::string("barrier") + (it % 2 ? "_async" : "") +
                       " (rank " + std::to_string(it % n) + " late) nranks=" + std::to_string(n);
    int64_t times[2];
    std::vector<int64_t> all(2 * n, -1);
    guarded(rep, desc, [&] {
      if (r == it % n) std::this_thread::sleep_for(std::chrono::milliseconds(150));
      times[0] = static_cast<int64_t>(mono_s() * 1e9);
      if (it % 2 && device_mode().on) {
        comm.barrier(stream());  // leaving is the stream passing it
        device::stream_synchronize(stream());
      } else if (it % 2) {
        comm.barrier_async().wait();
      } else {
        comm.barrier();
      }
      times[1] = static_cast<int64_t>(mono_s() * 1e9);
      comm.all_gather(times, all.data(), 2, DataType::int64);
    });
    int64_t max_enter = 0, min_exit = INT64_MAX;
    for (int q = 0; q < n; ++q) {
      max_enter = std::max(max_enter, all[2 * q]);
      min_exit = std::min(min_exit, all[2 * q + 1]);
    }
    std::string err;
    if (all[2 * r] != times[0] || all[2 * r + 1] != times[1]) err = "all_gather of timestamps is wrong";
    else if (min_exit < max_enter)
      err = "a rank left the barrier " + std::to_string((max_enter - min_exit) / 1e6) +
            " ms before the last rank entered";
    rep.result(desc, err);
  }
}

// split(): even/odd colors with reversed keys, a color -1 rank, nested split.
void test_split(Comm& comm, Reporter& rep, uint64_t seed) {
  int r = comm.rank(), n = comm.size();
  {
    std::string desc = "split(color=rank%2, key=-rank) then all_gather/all_reduce/broadcast on it, nranks=" + std::to_string(n);
    std::vector<int> members;  // old ranks, in new-rank order: key -old ascending
    for (int q = n - 1; q >= 0; --q)
      if (q % 2 == r % 2) members.push_back(q);
    int expect_rank = static_cast<int>(std::find(members.begin(), members.end(), r) - members.begin());
    int m = static_cast<int>(members.size());
    std::string err;
    Comm sub;
    guarded(rep, desc, [&] { sub = comm.split(r % 2, -r); });
    if (!sub.valid()) {
      err = "split returned a null Comm for color " + std::to_string(r % 2);
    } else if (sub.size() != m || sub.rank() != expect_rank) {
      err = "sub-communicator rank/size " + std::to_string(sub.rank()) + "/" + std::to_string(sub.size()) +
            ", expected " + std::to_string(expect_rank) + "/" + std::to_string(m);
    } else {
      std::vector<int32_t> gathered(m, -1);
      int32_t mine = r;
      const size_t cnt = 1001;
      std::vector<float> x(cnt), y(cnt, -1.f);
      auto val = [&](int old, size_t i) {  // small integers: exact float sums
        return static_cast<float>(static_cast<int>(mix64(seed + old * 7919 + i) % 201) - 100);
      };
      for (size_t i = 0; i < cnt; ++i) x[i] = val(r, i);
      std::vector<double> z(cnt);
      guarded(rep, desc, [&] {
        sub.all_gather(&mine, gathered.data(), 1, DataType::int32);
        sub.all_reduce(x.data(), y.data(), cnt, DataType::float32, ReduceOp::sum);
        // broadcast from new rank 0 (the highest old rank of this color)
        for (size_t i = 0; i < cnt; ++i) z[i] = sub.rank() == 0 ? val(r, i) * 0.5 : -7;
        sub.broadcast(z.data(), z.data(), cnt, DataType::float64, 0);
      });
      for (int k = 0; k < m && err.empty(); ++k)
        if (gathered[k] != members[k])
          err = "all_gather on sub-communicator: position " + std::to_string(k) + " holds old rank " +
                std::to_string(gathered[k]) + ", expected " + std::to_string(members[k]);
      for (size_t i = 0; i < cnt && err.empty(); ++i) {
        float e = 0;
        for (int q : members) e += val(q, i);
        if (y[i] != e)
          err = "all_reduce on sub-communicator: index " + std::to_string(i) + " got " +
                std::to_string(y[i]) + " expected " + std::to_string(e);
        if (err.empty() && z[i] != val(members[0], i) * 0.5)
          err = "broadcast on sub-communicator: index " + std::to_string(i) + " got " + std::to_string(z[i]);
      }
      // nested split of the sub-communicator, same order (key = rank)
      if (err.empty()) {
        Comm sub2;
        int64_t one = r, tot = -1;
        guarded(rep, desc + " [nested split]", [&] {
          sub2 = sub.split(5, sub.rank());
          if (sub2.valid()) sub2.reduce(&one, &tot, 1, DataType::int64, ReduceOp::sum, sub2.size() - 1);
        });
        int64_t e = 0;
        for (int q : members) e += q;
        if (!sub2.valid() || sub2.size() != m || sub2.rank() != expect_rank)
          err = "nested split gave a wrong communicator";
        else if (sub2.rank() == m - 1 && tot != e)
          err = "reduce on nested split: got " + std::to_string(tot) + " expected " + std::to_string(e);
        if (sub2.valid()) guarded(rep, desc + " [destroy nested]", [&] { sub2.destroy(); });
      }
    }
    if (sub.valid()) guarded(rep, desc + " [destroy]", [&] { sub.destroy(); });
    rep.result(desc, err);
  }
  {
    std::string desc = "split(color = rank==0 ? -1 : 7, key=0): null Comm on rank 0, all_reduce on the rest, nranks=" + std::to_string(n);
    std::string err;
    Comm sub;
    guarded(rep, desc, [&] { sub = comm.split(r == 0 ? -1 : 7, 0); });
    if (r == 0) {
      if (sub.valid()) err = "color -1 returned a valid Comm";
      else {
        try {
          sub.barrier();
          err = "barrier on a null Comm did not throw";
        } catch (const InvalidUsage&) {
        } catch (const std::exception& e) {
          err = std::string("barrier on a null Comm threw the wrong type: ") + e.what();
        }
      }
    } else if (!sub.valid() || sub.size() != n - 1 || sub.rank() != r - 1) {
      err = "wrong communicator for color 7 (ties ordered by old rank)";
    } else {
      std::vector<int64_t> x(65537), y(65537, -1);
      for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<int64_t>(mix64(seed + r * 100003 + i) >> 24);
      guarded(rep, desc, [&] { sub.all_reduce(x.data(), y.data(), x.size(), DataType::int64, ReduceOp::sum); });
      for (size_t i = 0; i < x.size() && err.empty(); ++i) {
        int64_t e = 0;
        for (int q = 1; q < n; ++q) e += static_cast<int64_t>(mix64(seed + q * 100003 + i) >> 24);
        if (y[i] != e) err = "all_reduce on sub-communicator wrong at index " + std::to_string(i);
      }
      guarded(rep, desc + " [destroy]", [&] { sub.destroy(); });
    }
    rep.result(desc, err);
  }
  // the parent still works after its children are gone
  auto c = make_case(comm, Collective::all_reduce, DataType::float32, ReduceOp::sum, 4097, false, -1, seed + 99);
  c->prepare();
  guarded(rep, "all_reduce on parent after split", [&] {
    start_case(comm, *c, Issue::blocking);
    finish_case(Issue::blocking);
  });
  rep.result("all_reduce on parent after split/destroy of children, nranks=" + std::to_string(n), c->check());
}

}  // namespace

void run_misc_tests(Comm& comm, Reporter& rep, const std::vector<DataType>& types, uint64_t seed) {
  uint64_t s = mix64(seed ^ 0xabcdef);
  test_p2p_ring(comm, rep, types, s + 1);
  test_p2p_async(comm, rep, s + 2);
  test_group_p2p(comm, rep, s + 3);
  test_async_mix(comm, rep, s + 4);
  test_async_returns_at_once(comm, rep, s + 5);
  test_barrier(comm, rep);
  test_split(comm, rep, s + 6);
}

}  // namespace strata_test
