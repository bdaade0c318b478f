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
  if (!is_valid(type))
    throw InvalidArgument(std::string(call) + ": data type " + std::to_string(static_cast<int>(type)) +
                          " is not valid");
  if (!is_valid(op))
    throw InvalidArgument(std::string(call) + ": reduce op " + std::to_string(static_cast<int>(op)) + " is not valid");
}

size_t bytes_of(size_t count, DataType type, const char* call) {
  const size_t size = size_of(type);
  if (count > SIZE_MAX / size)
    throw InvalidArgument(std::string(call) + ": " + std::to_string(count) + " elements overflow");
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

EmulatedExecution::EmulatedExecution(EmulatedMemory& memory, ContextLock& lock, unsigned delay_us)
    : memory_(memory), lock_(lock), delay_us_(delay_us), default_stream_(std::make_unique<Stream>(delay_us)) {}

EmulatedExecution::~EmulatedExecution() = default;

Stream& EmulatedExecution::stream(device::Stream s, const char* call) {
  if (!s) return *default_stream_;
  std::lock_guard lk(m_);
  auto it = streams_.find(s);
  if (it == streams_.end())
    throw InvalidArgument(std::string(call) + ": " + address_text(s) + " is not a stream of the emulated backend");
  return *it->second.stream;
}

std::pair<Stream*, uint64_t> EmulatedExecution::enqueue(device::Stream s, const char* call,
                                                        std::function<void()> task) {
  Stream& st = stream(s, call);
  if (!lock_.enabled()) return {&st, st.enqueue(std::move(task))};
  // CUDA's legacy default stream: taken under m_, so the points waited for are those
  // queued before this task on every stream.
  std::lock_guard lk(m_);
  if (blocking_streams_ == 0) return {&st, st.enqueue(std::move(task))};
  std::vector<std::pair<std::shared_ptr<Stream>, uint64_t>> before;
  if (!s) {
    for (auto& [handle, made] : streams_)
      if (made.blocking) before.emplace_back(made.stream, made.stream->queued());
  } else if (streams_.at(s).blocking) {
    before.emplace_back(std::shared_ptr<Stream>(default_stream_.get(), [](Stream*) {}), default_stream_->queued());
  }
  if (before.empty()) return {&st, st.enqueue(std::move(task))};
  return {&st, st.enqueue([before = std::move(before), task = std::move(task)] {
            for (const auto& [other, ticket] : before) other->wait_reached(ticket);
            task();
          })};
}

std::shared_ptr<Event> EmulatedExecution::event(device::Event e, const char* call) {
  std::lock_guard lk(m_);
  auto it = events_.find(e);
  if (it == events_.end())
    throw InvalidArgument(std::string(call) + ": " + address_text(e) + " is not an event of the emulated backend");
  return it->second;
}

device::Stream EmulatedExecution::stream_create(StreamFlags flags) {
  lock_.need("stream_create (cudaStreamCreateWithFlags)");
  auto s = std::make_shared<Stream>(delay_us_);
  void* handle = s.get();
  const bool blocking = flags == StreamFlags::blocking;
  std::lock_guard lk(m_);
  streams_.emplace(handle, Made{std::move(s), blocking});
  blocking_streams_ += blocking;
  return handle;
}

void EmulatedExecution::stream_destroy(device::Stream s) {
  std::shared_ptr<Stream> gone;
  {
    std::lock_guard lk(m_);
    auto it = streams_.find(s);
    if (it == streams_.end())
      throw InvalidArgument("stream_destroy: " + address_text(s) + " is not a stream of the emulated backend");
    gone = std::move(it->second.stream);
    blocking_streams_ -= it->second.blocking;
    streams_.erase(it);
    capturing_.erase(s);
  }
  // Destroyed outside the lock: it first runs what is queued.
}

void EmulatedExecution::synchronize_all() {
  std::vector<std::shared_ptr<Stream>> all;
  {
    std::lock_guard lk(m_);
    for (auto& [handle, made] : streams_) all.push_back(made.stream);  // kept, should another thread destroy it
  }
  // Outside the lock, as a stream's task may create or look up streams.
  default_stream_->synchronize();
  for (const auto& s : all) s->synchronize();
}

void EmulatedExecution::stream_synchronize(device::Stream s) { stream(s, "stream_synchronize").synchronize(); }

bool EmulatedExecution::stream_capturing(device::Stream s) {
  stream(s, "stream_capturing");
  std::lock_guard lk(m_);
  return capturing_.count(s) != 0;
}

void EmulatedExecution::set_capturing(device::Stream s, bool capturing) {
  stream(s, capturing ? "begin_capture" : "end_capture");
  std::lock_guard lk(m_);
  if (!capturing) capturing_.erase(s);
  else if (!capturing_.insert(s).second)
    throw InvalidUsage("begin_capture: " + address_text(s) + " is already being captured");
}

device::Event EmulatedExecution::event_create() {
  lock_.need("event_create (cudaEventCreateWithFlags)");
  auto e = std::make_shared<Event>();
  void* handle = e.get();
  std::lock_guard lk(m_);
  events_.emplace(handle, std::move(e));
  return handle;
}

void EmulatedExecution::event_destroy(device::Event e) {
  std::lock_guard lk(m_);
  if (events_.erase(e) == 0)
    throw InvalidArgument("event_destroy: " + address_text(e) + " is not an event of the emulated backend");
}

void EmulatedExecution::event_record(device::Event e, device::Stream s) {
  stream(s, "event_record");
  std::shared_ptr<Event> ev = event(e, "event_record");
  const uint64_t g = ev->mark();
  enqueue(s, "event_record", [ev, g] { ev->complete(g); });
}

bool EmulatedExecution::event_query(device::Event e) { return event(e, "event_query")->done(); }

void EmulatedExecution::event_synchronize(device::Event e) {
  std::shared_ptr<Event> ev = event(e, "event_synchronize");
  ev->wait(ev->last());
}

void EmulatedExecution::stream_wait(device::Stream s, device::Event e) {
  stream(s, "stream_wait");
  std::shared_ptr<Event> ev = event(e, "stream_wait");
  const uint64_t g = ev->last();  // the record made before this call, as CUDA waits
  enqueue(s, "stream_wait", [ev, g] { ev->wait(g); });
}

void EmulatedExecution::copy(void* dst, const void* src, size_t bytes, device::Stream s) {
  stream(s, "copy");
  auto d = memory_.access(dst, bytes, "copy (destination)");
  auto r = memory_.access(src, bytes, "copy (source)");
  if (bytes == 0) return;  // nothing to order (and memmove takes no null pointers)
  auto task = [d, r, bytes] { std::memmove(d.bytes, r.bytes, bytes); };
  // Pageable host memory on either side (not the backend's pinned memory): CUDA's copy
  // waits for its stream to get there and run it, holding the context lock (CUDA Runtime
  // API, "API synchronization behavior"; measured on an H200: docs/gpu.md).
  if (!lock_.enabled() || (d.keep && r.keep)) {
    enqueue(s, "copy", task);
    return;
  }
  lock_.hold_while("a copy with pageable host memory (cudaMemcpyAsync)", "its stream to reach and run it", [&] {
    auto [st, ticket] = enqueue(s, "copy", task);
    st->wait_reached(ticket);
  });
}

void EmulatedExecution::memset(void* dst, int value, size_t bytes, device::Stream s) {
  stream(s, "memset");
  auto d = memory_.access(dst, bytes, "memset");
  if (bytes == 0) return;
  enqueue(s, "memset", [d, value, bytes] { std::memset(d.bytes, value, bytes); });
}

void EmulatedExecution::reduce(void* dst, const void* const* srcs, int nsrc, size_t count, DataType type, ReduceOp op,
                               device::Stream s) {
  check_type(type, op, "reduce");
  if (nsrc < 1 || nsrc > kMaxReduceSources || !srcs)
    throw InvalidArgument("reduce: " + std::to_string(nsrc) + " sources (1 to " + std::to_string(kMaxReduceSources) +
                          ")");
  stream(s, "reduce");
  const size_t bytes = bytes_of(count, type, "reduce");
  auto d = memory_.access(dst, bytes, "reduce (destination)");
  std::array<EmulatedMemory::Access, kMaxReduceSources> in{};
  for (int k = 0; k < nsrc; ++k) in[k] = memory_.access(srcs[k], bytes, "reduce (source)");
  const ReduceLoop loop = elementwise::with_element(type, [&](auto e) {
    return elementwise::with_op(op, [](auto o) -> ReduceLoop { return reduce_loop<decltype(e), decltype(o)>; });
  });
  enqueue(s, "reduce", [d, in, nsrc, count, loop] {
    std::array<const void*, kMaxReduceSources> from{};
    for (int k = 0; k < nsrc; ++k) from[k] = in[k].bytes;
    loop(d.bytes, from.data(), nsrc, count);
  });
}

void EmulatedExecution::finalize(void* dst, size_t count, DataType type, ReduceOp op, int nranks, device::Stream s) {
  check_type(type, op, "finalize");
  if (nranks < 1) throw InvalidArgument("finalize: nranks is " + std::to_string(nranks));
  stream(s, "finalize");
  auto d = memory_.access(dst, bytes_of(count, type, "finalize"), "finalize");
  if (op != ReduceOp::avg || nranks == 1) return;
  const DivideLoop loop =
      elementwise::with_element(type, [](auto e) -> DivideLoop { return divide_loop<decltype(e)>; });
  enqueue(s, "finalize", [d, count, nranks, loop] { loop(d.bytes, count, nranks); });
}

void EmulatedExecution::host_callback(device::Stream s, void (*fn)(void*), void* arg) {
  if (!fn) throw InvalidArgument("host_callback: fn is null");
  enqueue(s, "host_callback", [fn, arg] { fn(arg); });
}

void EmulatedExecution::host_task(device::Stream s, const void* const* ptrs, int n, HostTask fn) {
  if (!fn) throw InvalidArgument("host_task: fn is empty");
  if (n < 0 || (n > 0 && !ptrs))
    throw InvalidArgument("host_task: " + std::to_string(n) + " pointers at " + address_text(ptrs));
  stream(s, "host_task");
  // Each pointer's bytes through the backend's mapping, kept mapped until the task ran.
  std::vector<EmulatedMemory::Access> in;
  in.reserve(n);
  for (int i = 0; i < n; ++i) in.push_back(memory_.access(ptrs[i], 0, "host_task"));
  enqueue(s, "host_task", [in = std::move(in), fn = std::move(fn)] {
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
  stream(s, "write_value");
  RegionRef keep;
  uint64_t* word = flag_word(flag, "write_value", keep);
  enqueue(s, "write_value", [word, keep, v] { __atomic_store_n(word, v, __ATOMIC_RELEASE); });
}

void EmulatedExecution::wait_value(device::Stream s, const uint64_t* flag, uint64_t v) {
  stream(s, "wait_value");
  RegionRef keep;
  const uint64_t* word = flag_word(flag, "wait_value", keep);
  enqueue(s, "wait_value", [word, keep, v] { wait_at_least(word, v); });
}

}  // namespace strata::device::emulated
