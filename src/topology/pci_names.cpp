#include "topology/pci_names.hpp"

#include <cstdio>

namespace strata::topo {

std::string pci_class_name(uint16_t c) {
  switch (c) {
    case 0x0100:
      return "SCSI";
    case 0x0101:
      return "IDE";
    case 0x0104:
      return "RAID";
    case 0x0106:
      return "SATA";
    case 0x0107:
      return "SAS";
    case 0x0108:
      return "NVMe";
    case 0x0200:
      return "Ethernet";
    case 0x0207:
      return "InfiniBand";
    case 0x0208:
      return "Fabric";
    case 0x0280:
      return "Network";
    case 0x0300:
      return "VGA";
    case 0x0302:
      return "3D";
    case 0x0380:
      return "Display";
    case 0x0604:
      return "PCI bridge";
    case 0x0680:
      return "Bridge";
    case 0x0b40:
      return "Co-processor";
    case 0x0c03:
      return "USB";
    case 0x0c06:
      return "InfiniBand";
    case 0x1200:
      return "Accelerator";
    default:
      break;
  }
  switch (c >> 8) {
    case 0x01:
      return "Storage";
    case 0x02:
      return "Network";
    case 0x03:
      return "Display";
    case 0x06:
      return "Bridge";
    case 0x12:
      return "Accelerator";
    default:
      break;
  }
  char buf[24];
  snprintf(buf, sizeof buf, "class 0x%04x", c);
  return buf;
}

std::string pci_vendor_name(uint16_t v) {
  switch (v) {
    case 0x10de:
      return "NVIDIA";
    case 0x1002:
      return "AMD";
    case 0x1022:
      return "AMD";
    case 0x8086:
      return "Intel";
    case 0x15b3:
      return "Mellanox";
    case 0x14e4:
      return "Broadcom";
    case 0x1077:
      return "QLogic";
    case 0x1d0f:
      return "Amazon";
    case 0x1af4:
      return "virtio";
    case 0x1924:
      return "Solarflare";
    default:
      break;
  }
  char buf[24];
  snprintf(buf, sizeof buf, "vendor 0x%04x", v);
  return buf;
}

}  // namespace strata::topo
