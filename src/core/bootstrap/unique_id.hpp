// The unique id's layout: the bootstrap root's address and the job's secret.
#pragma once

#include <cstdint>
#include <string>

#include "ground/socket.hpp"
#include "strata/strata.hpp"

namespace strata::bootstrap {

struct Secret {
  uint8_t bytes[16];
};

struct IdFields {
  net::SockAddr root;
  Secret secret;
};

UniqueId encode_id(const IdFields& f);
IdFields decode_id(const UniqueId& id);  // InvalidArgument if it is not a Strata id

// Exactly 2n hex digits (either case) into n bytes; false for anything else.
bool parse_hex(const std::string& hex, uint8_t* out, size_t n);

Secret random_secret();
// 32 hex digits (STRATA_SECRET); InvalidArgument otherwise.
Secret parse_secret_hex(const std::string& hex);

// The secret of a job whose root address is derived from its launcher (torchrun, Slurm):
// SipHash-2-4 keyed by the user's secret (STRATA_SECRET; all zero when unset) over the
// launcher's job id, so each job presents its own secret and one job's reveals neither
// the key nor another job's.
Secret derive_secret(const Secret& key, const std::string& job_id);
// SipHash-2-4 (Aumasson and Bernstein), exposed for its test vectors.
uint64_t siphash24(const uint8_t key[16], const void* data, size_t len);

}  // namespace strata::bootstrap
