#define _POSIX_C_SOURCE 200809L
#define _GNU_SOURCE 1  /* dladdr */
#include "harness.h"

#include <dlfcn.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int g_rank = -1, g_size = 0, g_checks = 0, g_failed = 0;

double harness_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int env_int(const char* name, int* out) {
  const char* v = getenv(name);
  if (!v || !*v) return 0;
  *out = atoi(v);
  return 1;
}

void harness_rank_from_env(void) {
  if (env_int("STRATA_RANK", &g_rank) && env_int("STRATA_WORLD_SIZE", &g_size)) return;
  if (env_int("OMPI_COMM_WORLD_RANK", &g_rank) && env_int("OMPI_COMM_WORLD_SIZE", &g_size)) return;
  fprintf(stderr, "start me under strata-run or mpirun (no STRATA_RANK or OMPI_COMM_WORLD_RANK)\n");
  exit(2);
}

ncclUniqueId harness_world_id(const char* id_file) {
  ncclUniqueId id;
  harness_rank_from_env();
  if (g_rank == 0) {
    char tmp[4096];
    FILE* f;
    harness_must(ncclGetUniqueId(&id), "ncclGetUniqueId(&id)", __FILE__, __LINE__);
    snprintf(tmp, sizeof tmp, "%s.tmp", id_file);
    f = fopen(tmp, "wb");
    if (!f || fwrite(&id, sizeof id, 1, f) != 1 || fclose(f) != 0 || rename(tmp, id_file) != 0) {
      fprintf(stderr, "rank 0: cannot write %s\n", id_file);
      exit(2);
    }
  } else {
    const double give_up = harness_now() + 60;
    for (;;) {
      FILE* f = fopen(id_file, "rb");
      if (f) {
        const int ok = fread(&id, sizeof id, 1, f) == 1;
        fclose(f);
        if (ok) break;
      }
      if (harness_now() > give_up) {
        fprintf(stderr, "rank %d: no unique id in %s after 60 s\n", g_rank, id_file);
        exit(2);
      }
      {
        const struct timespec nap = {0, 2000000};
        nanosleep(&nap, NULL);
      }
    }
  }
  return id;
}

/* Which libnccl.so.2 the loader picked: where the machine has NVIDIA's too (a GPU
   machine's PyTorch does), a library path that puts it first runs these checks against
   NVIDIA's. HARNESS_LIBNCCL names the one they must run against. */
static void harness_check_library(void) {
  Dl_info info;
  const char* want = getenv("HARNESS_LIBNCCL");
  char got[4096], wanted[4096];
  if (!dladdr((void*)&ncclCommInitRank, &info) || !info.dli_fname) return;
  if (g_rank == 0) printf("libnccl: %s\n", info.dli_fname);
  if (!want || !*want) return;
  if (!realpath(info.dli_fname, got) || !realpath(want, wanted) || strcmp(got, wanted) != 0) {
    fprintf(stderr, "rank %d: these checks run against %s, not %s (HARNESS_LIBNCCL)\n", g_rank, info.dli_fname, want);
    exit(2);
  }
}

ncclComm_t harness_world(const char* id_file) {
  ncclComm_t comm = NULL;
  harness_check_library();
  const ncclUniqueId id = harness_world_id(id_file);
  harness_must(ncclCommInitRank(&comm, g_size, id, g_rank), "ncclCommInitRank(world)", __FILE__, __LINE__);
  return comm;
}

void harness_check(int ok, const char* what, const char* file, int line) {
  ++g_checks;
  if (ok) return;
  ++g_failed;
  fprintf(stderr, "FAIL rank %d %s:%d: %s (last error: %s)\n", g_rank, file, line, what, ncclGetLastError(NULL));
}

void harness_check_result(ncclResult_t got, ncclResult_t want, const char* call, const char* file, int line) {
  ++g_checks;
  if (got == want) return;
  ++g_failed;
  fprintf(stderr, "FAIL rank %d %s:%d: %s returned %d (%s), expected %d (%s); last error: %s\n", g_rank, file, line,
          call, (int)got, ncclGetErrorString(got), (int)want, ncclGetErrorString(want), ncclGetLastError(NULL));
}

void harness_must(ncclResult_t got, const char* call, const char* file, int line) {
  if (got == ncclSuccess) return;
  fprintf(stderr, "FATAL rank %d %s:%d: %s returned %s: %s\n", g_rank, file, line, call, ncclGetErrorString(got),
          ncclGetLastError(NULL));
  exit(2);
}

int harness_report(const char* program) {
  printf("%s rank %d: %d checks, %d failed\n", program, g_rank, g_checks, g_failed);
  fflush(stdout);
  return g_failed ? 1 : 0;
}

/* ---- elements ---- */

size_t harness_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

const char* harness_type_name(ncclDataType_t t) {
  static const char* names[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "float16",
                                "float32", "float64", "bfloat16", "f8e4m3", "f8e5m2"};
  return (int)t >= 0 && (int)t < 12 ? names[t] : "invalid";
}

/* Decoders written from the formats' definitions: sign, biased exponent, mantissa. */
static double decode_float(unsigned bits, int exp_bits, int mant_bits, int has_inf) {
  const unsigned sign = bits >> (exp_bits + mant_bits);
  const unsigned e = (bits >> mant_bits) & ((1u << exp_bits) - 1);
  const unsigned m = bits & ((1u << mant_bits) - 1);
  const int bias = (1 << (exp_bits - 1)) - 1;
  double v;
  if (e == 0) v = ldexp((double)m, 1 - bias - mant_bits);
  else if (e == (1u << exp_bits) - 1 && has_inf) v = m ? NAN : INFINITY;
  else v = ldexp((double)(m | (1u << mant_bits)), (int)e - bias - mant_bits);
  return sign ? -v : v;
}

/* The code of a value the format holds exactly (a small integer, a power-of-two fraction). */
static unsigned encode_exact(double v, int exp_bits, int mant_bits) {
  unsigned sign = 0, e, m;
  int exp2;
  double frac;
  const int bias = (1 << (exp_bits - 1)) - 1;
  if (v < 0) sign = 1, v = -v;
  if (v == 0) return sign << (exp_bits + mant_bits);
  frac = frexp(v, &exp2); /* v = frac * 2^exp2, frac in [0.5, 1) */
  e = (unsigned)(exp2 - 1 + bias);
  m = (unsigned)((frac * 2 - 1) * (double)(1u << mant_bits));
  return (sign << (exp_bits + mant_bits)) | (e << mant_bits) | m;
}

double harness_get(const void* buf, ncclDataType_t t, size_t i) {
  switch (t) {
    case ncclInt8: return ((const int8_t*)buf)[i];
    case ncclUint8: return ((const uint8_t*)buf)[i];
    case ncclInt32: return ((const int32_t*)buf)[i];
    case ncclUint32: return ((const uint32_t*)buf)[i];
    case ncclInt64: return (double)((const int64_t*)buf)[i];
    case ncclUint64: return (double)((const uint64_t*)buf)[i];
    case ncclFloat16: return decode_float(((const uint16_t*)buf)[i], 5, 10, 1);
    case ncclBfloat16: return decode_float(((const uint16_t*)buf)[i], 8, 7, 1);
    case ncclFloat32: return ((const float*)buf)[i];
    case ncclFloat64: return ((const double*)buf)[i];
    case ncclFloat8e4m3: {
      const unsigned b = ((const uint8_t*)buf)[i];
      return (b & 0x7f) == 0x7f ? NAN : decode_float(b, 4, 3, 0); /* e4m3: no infinity, S.1111.111 is NaN */
    }
    case ncclFloat8e5m2: return decode_float(((const uint8_t*)buf)[i], 5, 2, 1);
    default: return NAN;
  }
}

void harness_put(void* buf, ncclDataType_t t, size_t i, double v) {
  switch (t) {
    case ncclInt8: ((int8_t*)buf)[i] = (int8_t)v; break;
    case ncclUint8: ((uint8_t*)buf)[i] = (uint8_t)v; break;
    case ncclInt32: ((int32_t*)buf)[i] = (int32_t)v; break;
    case ncclUint32: ((uint32_t*)buf)[i] = (uint32_t)v; break;
    case ncclInt64: ((int64_t*)buf)[i] = (int64_t)v; break;
    case ncclUint64: ((uint64_t*)buf)[i] = (uint64_t)v; break;
    case ncclFloat16: ((uint16_t*)buf)[i] = (uint16_t)encode_exact(v, 5, 10); break;
    case ncclBfloat16: ((uint16_t*)buf)[i] = (uint16_t)encode_exact(v, 8, 7); break;
    case ncclFloat32: ((float*)buf)[i] = (float)v; break;
    case ncclFloat64: ((double*)buf)[i] = v; break;
    case ncclFloat8e4m3: ((uint8_t*)buf)[i] = (uint8_t)encode_exact(v, 4, 3); break;
    case ncclFloat8e5m2: ((uint8_t*)buf)[i] = (uint8_t)encode_exact(v, 5, 2); break;
    default: break;
  }
}

int harness_equal(double got, double want, ncclDataType_t t, int rounded) {
  double rel;
  if (!rounded || t == ncclInt8 || t == ncclUint8 || t == ncclInt32 || t == ncclUint32 || t == ncclInt64 ||
      t == ncclUint64)
    return got == want;
  switch (t) { /* half an ulp of one rounding, with room */
    case ncclFloat16: rel = 1e-3; break;
    case ncclBfloat16: rel = 8e-3; break;
    case ncclFloat32: rel = 1e-6; break;
    case ncclFloat8e4m3: rel = 0.07; break;
    case ncclFloat8e5m2: rel = 0.13; break;
    default: rel = 1e-12; break;
  }
  return fabs(got - want) <= rel * fabs(want);
}

/* ---- buffers ---- */

#ifdef HARNESS_CUDA
#include <cuda_runtime.h>

static void cuda_must(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  fprintf(stderr, "FATAL rank %d: %s: %s\n", g_rank, what, cudaGetErrorString(e));
  exit(2);
}
void* harness_alloc(size_t bytes) {
  void* p = NULL;
  cuda_must(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc");
  cuda_must(cudaMemset(p, 0, bytes), "cudaMemset");
  return p;
}
void harness_free(void* p) { cuda_must(cudaFree(p), "cudaFree"); }
void harness_upload(void* dst, const void* host, size_t bytes) {
  cuda_must(cudaMemcpy(dst, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the device");
}
void harness_download(void* host, const void* src, size_t bytes) {
  cuda_must(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, harness_stream()), "cudaMemcpyAsync from the device");
  cuda_must(cudaStreamSynchronize(harness_stream()), "cudaStreamSynchronize");
}
cudaStream_t harness_stream(void) {
  static cudaStream_t s = NULL;
  if (!s) cuda_must(cudaStreamCreate(&s), "cudaStreamCreate");
  return s;
}
void harness_sync(void) { cuda_must(cudaStreamSynchronize(harness_stream()), "cudaStreamSynchronize"); }
const char* harness_memory(void) { return "cuda"; }
#elif defined(HARNESS_STRATA_DEVICE)
/* harness_device.cpp: Strata's device layer */
#else
void* harness_alloc(size_t bytes) { return calloc(bytes ? bytes : 1, 1); }
void harness_free(void* p) { free(p); }
void harness_upload(void* dst, const void* host, size_t bytes) { memcpy(dst, host, bytes); }
void harness_download(void* host, const void* src, size_t bytes) { memcpy(host, src, bytes); }
cudaStream_t harness_stream(void) { return NULL; }
void harness_sync(void) {}
const char* harness_memory(void) { return "host"; }
#endif
