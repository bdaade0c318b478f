// Validation data: every rank fills its input from (rank, index) with small integers, so
// that sums, products, min/max and averages are exact in every type for the rank counts
// we run; the expected result is recomputed on the host by a serial loop over ranks and
// compared element by element (the #wrong column).
//
// Exactness limits: sums reach 5*nranks (int8 wraps past 127 on both sides alike; half
// and bfloat16 stay exact up to ~51 ranks); products reach 2^ceil(nranks/3).
#pragma once

#include <cstddef>
#include <cstdint>

#include "collective.hpp"
#include "dtype.hpp"

namespace perf {

struct CheckSpec {
  Coll coll = Coll::all_reduce;
  DType type = DType::float32;
  RedOp op = RedOp::sum;
  int root = 0;
  int rank = 0;
  int nranks = 1;
  Layout layout;
  bool in_place = false;
  uint32_t seed = 0;  // shifts the index so that repeated checks use different data
};

// Input element `index` of `rank` for a reduction with `op`.
double reduce_input(RedOp op, int rank, int nranks, size_t index);
// Input element `index` of `rank` for data-movement collectives; identifies its source.
double move_input(int rank, size_t index);
// The reduction of reduce_input over all ranks at `index`, before rounding into a type
// (avg divides by nranks; integer types truncate).
double reduced_value(RedOp op, DType t, int nranks, size_t index);

struct CallBuffers {
  const void* send;
  void* recv;
};
// The pointers the collective is called with, nccl-tests style: out of place the two
// buffers; in place send = recvbuf + send_inplace_off*rank, recv = recvbuf + recv_inplace_off*rank.
CallBuffers call_buffers(const CheckSpec& s, void* sendbuf, void* recvbuf);

// Zeroes the receive region and writes this rank's input where the call reads it.
void prepare_input(const CheckSpec& s, void* sendbuf, void* recvbuf);

// What element `k` of this rank's result must be (already rounded into the type).
double expected_value(const CheckSpec& s, size_t k);

// Counts result elements that differ from the reference. Exact comparison, except a
// floating-point avg, which may be computed as a pre-multiplied sum (relative tolerance).
int64_t count_wrong(const CheckSpec& s, const void* recvbuf);

}  // namespace perf
