#include "ground/device/emulated/execution.hpp"

#include <array>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ground/device/backend.hpp"
#include "ground/device/functors.hpp"
#include "strata/error.hpp"

namespace strata::device::emulated {

namespace {

// The reduce task's loop for one type and op (the functors do the arithmetic).
using ReduceLoop = void (*)(void* dst, const void* const* srcs, int nsrc, size_t count);

template <typename E, typename Op>
void reduce_loop(void* dst, const void* const* srcs, int nsrc, size_t count) {
  using S = typename E::Storage;
  const S* typed[kMaxReduceSources];
  for (int k = 0; k < nsrc; ++k) typed[k] = static_cast<const S*>(srcs[k]);
  S* d = static_cast<S*>(dst);
  for (size_t i = 0; i < count; ++i) d[i] = elementwise::reduce_at<E, Op>(typed, nsrc, i);
}

using DivideLoop = void (*)(void* dst, size_t count, int by);

template <typename E>
void divide_loop(void* dst, size_t count, int by) {
  auto* d = static_cast<typename E::Storage*>(dst);
  for (size_t i = 0; i < count; ++i) d[i] = elementwise::divide<E>(d[i], by);
}

void check_type(DataType type, ReduceOp op, const char* call) {
  if (!is_valid(type)) throw InvalidArgument(std::string(call) + ": data type " + std::to_string(static_cast<int>(type)) + " is not valid");
  if (!is_valid(op)) throw InvalidArgument(std::string(call) + ": reduce op " + std::to_string(static_cast<int>(op)) + " is not valid");
}

size_t bytes_of(size_t count, DataType type, const char* call) {
  const size_t size = size_of(type);
  if (count > SIZE_MAX / size) throw InvalidArgument(std::string(call) + ": " + std::to_string(count) + " elements overflow");
  return count * size;
}

// Polls a flag the way a GPU's wait does, without burning a core for long.
void wait_at_least(const uint64_t* word, uint64_t v) {
  auto pause = std::chrono::microseconds(0);
  while (__atomic_load_n(word, __ATOMIC_ACQUIRE) < v) {
    if (pause.count() == 0) {
      std::this_thread::yield();
      pause = std::chrono::microseconds(1);
    } else {
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(64));
    }
  }
}

}  // namespace

EmulatedExecution::EmulatedExecution(EmulatedMemory& memory, unsigned delay_us)
    : memory_(memory), delay_us_(delay_us), default_stream_(std::make_unique<Stream>(delay_us)) {}

EmulatedExecution::~EmulatedExecution() = default;

Stream& EmulatedExecution::stream(device::Stream s, const char* call) {
  if (!s) return *default_stream_;
  std::lock_guard lk(m_);
  auto it = streams_.find(s);
  if (it == streams_.end()) throw InvalidArgument(std::string(call) + ": " + address_text(s) + " is not a stream of the emulated backend");
  return *it->second;
}

std::shared_ptr<Event> EmulatedExecution::event(device::Event e, const char* call) {
  std::lock_guard lk(m_);
  auto it = events_.find(e);
  if (it == events_.end()) throw InvalidArgument(std::string(call) + ": " + address_text(e) + " is not an event of the emulated backend");
  return it->second;
}

device::Stream EmulatedExecution::stream_create() {
  refuse_while_streams_held("stream_create");
  auto s = std::make_shared<Stream>(delay_us_);
  void* handle = s.get();
  std::lock_guard lk(m_);
  streams_.emplace(handle, std::move(s));
  return handle;
}

void EmulatedExecution::stream_destroy(device::Stream s) {
  std::shared_ptr<Stream> gone;
  {
    std::lock_guard lk(m_);
    auto it = streams_.find(s);
    if (it == streams_.end()) throw InvalidArgument("stream_destroy: " + address_text(s) + " is not a stream of the emulated backend");
    gone = std::move(it->second);
    streams_.erase(it);
  }
  // Destroyed outside the lock: it first runs what is queued.
}

void EmulatedExecution::synchronize_all() {
  std::vector<std::shared_ptr<Stream>> all;
  {
    std::lock_guard lk(m_);
    for (auto& [handle, s] : streams_) all.push_back(s);  // kept, should another thread destroy it
  }
  // Outside the lock, as a stream's task may create or look up streams.
  default_stream_->synchronize();
  for (const auto& s : all) s->synchronize();
}

void EmulatedExecution::stream_synchronize(device::Stream s) { stream(s, "stream_synchronize").synchronize(); }

device::Event EmulatedExecution::event_create() {
  refuse_while_streams_held("event_create");
  auto e = std::make_shared<Event>();
  void* handle = e.get();
  std::lock_guard lk(m_);
  events_.emplace(handle, std::move(e));
  return handle;
}

void EmulatedExecution::event_destroy(device::Event e) {
  std::lock_guard lk(m_);
  if (events_.erase(e) == 0) throw InvalidArgument("event_destroy: " + address_text(e) + " is not an event of the emulated backend");
}

void EmulatedExecution::event_record(device::Event e, device::Stream s) {
  Stream& st = stream(s, "event_record");
  std::shared_ptr<Event> ev = event(e, "event_record");
  const uint64_t g = ev->mark();
  st.enqueue([ev, g] { ev->complete(g); });
}

bool EmulatedExecution::event_query(device::Event e) { return event(e, "event_query")->done(); }

void EmulatedExecution::event_synchronize(device::Event e) {
  std::shared_ptr<Event> ev = event(e, "event_synchronize");
  ev->wait(ev->last());
}

void EmulatedExecution::stream_wait(device::Stream s, device::Event e) {
  Stream& st = stream(s, "stream_wait");
  std::shared_ptr<Event> ev = event(e, "stream_wait");
  const uint64_t g = ev->last();  // the record made before this call, as CUDA waits
  st.enqueue([ev, g] { ev->wait(g); });
}

void EmulatedExecution::copy(void* dst, const void* src, size_t bytes, device::Stream s) {
  Stream& st = stream(s, "copy");
  auto d = memory_.access(dst, bytes, "copy (destination)");
  auto r = memory_.access(src, bytes, "copy (source)");
  if (bytes == 0) return;  // nothing to order (and memmove takes no null pointers)
  st.enqueue([d, r, bytes] { std::memmove(d.bytes, r.bytes, bytes); });
}

void EmulatedExecution::memset(void* dst, int value, size_t bytes, device::Stream s) {
  Stream& st = stream(s, "memset");
  auto d = memory_.access(dst, bytes, "memset");
  if (bytes == 0) return;
  st.enqueue([d, value, bytes] { std::memset(d.bytes, value, bytes); });
}

void EmulatedExecution::reduce(void* dst, const void* const* srcs, int nsrc, size_t count, DataType type, ReduceOp op,
                               device::Stream s) {
  check_type(type, op, "reduce");
  if (nsrc < 1 || nsrc > kMaxReduceSources || !srcs)
    throw InvalidArgument("reduce: " + std::to_string(nsrc) + " sources (1 to " + std::to_string(kMaxReduceSources) + ")");
  Stream& st = stream(s, "reduce");
  const size_t bytes = bytes_of(count, type, "reduce");
  auto d = memory_.access(dst, bytes, "reduce (destination)");
  std::array<EmulatedMemory::Access, kMaxReduceSources> in{};
  for (int k = 0; k < nsrc; ++k) in[k] = memory_.access(srcs[k], bytes, "reduce (source)");
  const ReduceLoop loop = elementwise::with_element(type, [&](auto e) {
    return elementwise::with_op(op, [](auto o) -> ReduceLoop { return reduce_loop<decltype(e), decltype(o)>; });
  });
  st.enqueue([d, in, nsrc, count, loop] {
    std::array<const void*, kMaxReduceSources> from{};
    for (int k = 0; k < nsrc; ++k) from[k] = in[k].bytes;
    loop(d.bytes, from.data(), nsrc, count);
  });
}

void EmulatedExecution::finalize(void* dst, size_t count, DataType type, ReduceOp op, int nranks, device::Stream s) {
  check_type(type, op, "finalize");
  if (nranks < 1) throw InvalidArgument("finalize: nranks is " + std::to_string(nranks));
  Stream& st = stream(s, "finalize");
  auto d = memory_.access(dst, bytes_of(count, type, "finalize"), "finalize");
  if (op != ReduceOp::avg || nranks == 1) return;
  const DivideLoop loop = elementwise::with_element(type, [](auto e) -> DivideLoop { return divide_loop<decltype(e)>; });
  st.enqueue([d, count, nranks, loop] { loop(d.bytes, count, nranks); });
}

void EmulatedExecution::host_callback(device::Stream s, void (*fn)(void*), void* arg) {
  if (!fn) throw InvalidArgument("host_callback: fn is null");
  stream(s, "host_callback").enqueue([fn, arg] { fn(arg); });
}

void EmulatedExecution::host_task(device::Stream s, const void* const* ptrs, int n, HostTask fn) {
  if (!fn) throw InvalidArgument("host_task: fn is empty");
  if (n < 0 || (n > 0 && !ptrs)) throw InvalidArgument("host_task: " + std::to_string(n) + " pointers at " + address_text(ptrs));
  Stream& st = stream(s, "host_task");
  // Each pointer's bytes through the backend's mapping, kept mapped until the task ran.
  std::vector<EmulatedMemory::Access> in;
  in.reserve(n);
  for (int i = 0; i < n; ++i) in.push_back(memory_.access(ptrs[i], 0, "host_task"));
  st.enqueue([in = std::move(in), fn = std::move(fn)] {
    std::vector<void*> views;
    views.reserve(in.size());
    for (const auto& a : in) views.push_back(a.bytes);
    fn(views.data());
  });
}

uint64_t* EmulatedExecution::flag_word(const void* flag, const char* call, RegionRef& keep) {
  if (!flag || reinterpret_cast<uintptr_t>(flag) % alignof(uint64_t) != 0)
    throw InvalidArgument(std::string(call) + ": the flag " + address_text(flag) + " is not an aligned 8-byte word");
  auto a = memory_.access(flag, sizeof(uint64_t), call);
  keep = a.keep;
  return reinterpret_cast<uint64_t*>(a.bytes);
}

void EmulatedExecution::write_value(device::Stream s, uint64_t* flag, uint64_t v) {
  Stream& st = stream(s, "write_value");
  RegionRef keep;
  uint64_t* word = flag_word(flag, "write_value", keep);
  st.enqueue([word, keep, v] { __atomic_store_n(word, v, __ATOMIC_RELEASE); });
}

void EmulatedExecution::wait_value(device::Stream s, const uint64_t* flag, uint64_t v) {
  Stream& st = stream(s, "wait_value");
  RegionRef keep;
  const uint64_t* word = flag_word(flag, "wait_value", keep);
  st.enqueue([word, keep, v] { wait_at_least(word, v); });
}

}  // namespace strata::device::emulated
