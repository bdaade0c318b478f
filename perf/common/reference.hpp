// Validation data: every rank fills its input from (rank, index) with small integers, so
// that sums, products, min/max and averages are exact in every type for the rank counts
// we run; the expected result is recomputed on the host by a serial loop over ranks and
// compared element by element (the #wrong column).
//
// Exactness limits: sums reach 5*nranks (int8 wraps past 127 on both sides alike; half
// and bfloat16 stay exact up to ~51 ranks); products reach 2^ceil(nranks/3). fp8 has 2 or
// 3 mantissa bits, so its inputs are smaller: sums of 0 and 1, averages of equal values 1
// or 2, and every partial sum stays exact up to 8 ranks (e5m2) or 16 (e4m3).
#pragma once

#include <cstddef>
#include <cstdint>

#include "timed_op.hpp"

namespace perf {

struct CheckSpec {
  Coll coll = Collective::all_reduce;
  DataType type = DataType::float32;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
  int rank = 0;
  int nranks = 1;
  size_t count = 0;  // the call's count (call_count)
  bool in_place = false;
  uint32_t seed = 0;  // shifts the index so that repeated checks use different data
};

// Input element `index` of `rank` for a reduction with `op` in type `t`.
double reduce_input(ReduceOp op, DataType t, int rank, int nranks, size_t index);
// Input element `index` of `rank` for data-movement collectives; identifies its source.
double move_input(int rank, size_t index);
// The reduction of reduce_input over all ranks at `index`, before rounding into a type
// (avg divides by nranks; integer types truncate).
double reduced_value(ReduceOp op, DataType t, int nranks, size_t index);

struct CallBuffers {
  const void* send;
  void* recv;
};
// The pointers the collective is called with, nccl-tests style: out of place the two
// buffers; in place both inside recvbuf, where the library's in-place rule puts them.
CallBuffers call_buffers(const CheckSpec& s, void* sendbuf, void* recvbuf);

// Zeroes the receive region and writes this rank's input where the call reads it.
void prepare_input(const CheckSpec& s, void* sendbuf, void* recvbuf);
// How many bytes from the start of each buffer prepare_input writes and the call reads
// or writes (what a device run copies in and out).
size_t touched_bytes(const CheckSpec& s);

// What element `k` of this rank's result must be (already rounded into the type).
double expected_value(const CheckSpec& s, size_t k);

// Counts result elements that differ from the reference. Exact comparison, except a
// floating-point avg, which may be computed as a pre-multiplied sum (relative tolerance).
int64_t count_wrong(const CheckSpec& s, const void* recvbuf);

}  // namespace perf
