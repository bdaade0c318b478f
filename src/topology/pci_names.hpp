// Short names for PCI classes and vendors, for when hwloc has no description (a live
// machine without the pci.ids database).
#pragma once

#include <cstdint>
#include <string>

namespace strata::topo {

std::string pci_class_name(uint16_t class_id);    // 0x0200 -> "Ethernet", else "class 0x1180"
std::string pci_vendor_name(uint16_t vendor_id);  // 0x10de -> "NVIDIA", else "vendor 0x1af4"

}  // namespace strata::topo
