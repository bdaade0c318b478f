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

Secret random_secret();
// 32 hex digits (STRATA_SECRET); InvalidArgument otherwise.
Secret parse_secret_hex(const std::string& hex);

}  // namespace strata::bootstrap
