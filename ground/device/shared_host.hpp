// Host memory another process of the node can map, for the whole process: every host
// allocation of every MemfdRegions (strata::alloc of host memory, the backends' pinned
// memory) and every buffer a communicator registered (Comm::register_buffer). The one
// place that answers "which shareable allocation does this pointer lie in, and its fd":
// the shm link asks it for each large send (docs/transports.md, "Zero-copy").
#pragma once

#include <cstddef>

#include "ground/device/memfd_regions.hpp"

namespace strata::device {

// The shareable host region holding [p, p + bytes), or nullptr.
RegionRef shareable_host_region(const void* p, size_t bytes);

// MemfdRegions enters and removes its host allocations here.
void index_shareable(const RegionRef& r);
void unindex_shareable(const MemfdRegion* r);

// Makes [p, p + bytes) shareable (Comm::register_buffer): the region of a strata
// allocation holding it, or else the shared mapping (memfd, /dev/shm or other MAP_SHARED
// file mapped from offset 0) found through /proc/self/maps, with an fd of it found among
// this process's open files (or, for root, /proc/self/map_files). Every registration
// counts: the region leaves the index when the last one is released. InvalidArgument,
// saying why, for anything else: private memory (malloc, new, the stack, MAP_PRIVATE)
// cannot be mapped by another process.
RegionRef register_shareable(const void* p, size_t bytes);
void release_registration(const RegionRef& r);

}  // namespace strata::device
