#!/usr/bin/env python3
"""Writes the hand-made seed inputs of tests/fuzz/corpus (run from anywhere; rewrites the
seed-*' files only, leaving inputs a fuzzer found -- crash-*, and others -- alone).

Each seed is a small valid input or an edge of one: what a harness needs to start from
to reach past the first check. Layouts follow the C++ structs (ground/socket.hpp's Hello,
core/bootstrap's RankInfo and unique id, the transports' wire formats, training's
checkpoint header); fuzz.NAME.corpus replays them in every build.
"""
import os
import re
import shutil
import socket
import struct
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def write(harness, name, data):
    d = os.path.join(HERE, "corpus", harness)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def fnv1a64(data, h=0xCBF29CE484222325):
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def fnv1a32(data):
    h = 2166136261
    for b in data:
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h


def sockaddr_in(ip, port):
    return struct.pack("<H", socket.AF_INET) + struct.pack(">H", port) + socket.inet_aton(ip) + bytes(8)


def sockaddr_in6(ip, port):
    return (struct.pack("<H", socket.AF_INET6) + struct.pack(">H", port) + bytes(4) +
            socket.inet_pton(socket.AF_INET6, ip) + bytes(4))


SECRET = bytes(range(1, 17))  # the bootstrap harness's job secret
TAG = 7                       # and its communicator tag


def unique_id():
    def wire(addr):
        w = struct.pack("<Q", 0x5354524154414944) + SECRET + struct.pack("<I", len(addr)) + addr
        return (w + bytes(28 - len(addr))).ljust(128, b"\0")
    write("unique_id", "ipv4", wire(sockaddr_in("127.0.0.1", 29500)))
    write("unique_id", "ipv6", wire(sockaddr_in6("::1", 29500)))
    write("unique_id", "zero", bytes(128))
    write("unique_id", "short", b"STRATAID")
    write("unique_id", "text-ok", "ok " + wire(sockaddr_in("10.0.0.1", 1)).hex())
    write("unique_id", "text-error", "error bind: Address already in use")
    write("unique_id", "secret-hex", SECRET.hex().upper())


def settings():
    names = re.findall(r'^    \{"(STRATA_\w+)"', open(os.path.join(ROOT, "ground/settings.cpp")).read(), re.M)
    n = len(names)
    pick = lambda name: bytes([names.index(name)])
    write("settings", "tcp-nsocks", pick("STRATA_TCP_NSOCKS") + b"4")
    write("settings", "chunk-suffix", pick("STRATA_CHUNK_BYTES") + b"1M")
    write("settings", "ring-huge", pick("STRATA_SHM_RING_BYTES") + b"9223372036854775807G")
    write("settings", "timeout", pick("STRATA_TIMEOUT") + b"1.5e1")
    write("settings", "timeout-nan", pick("STRATA_TIMEOUT") + b"nan")
    write("settings", "transport", pick("STRATA_TRANSPORT") + b"tcp")
    write("settings", "gid-negative", pick("STRATA_IB_GID_INDEX") + b"-1")
    write("settings", "hierarchy", bytes([n + 0]) + b"node:2,island:2")
    write("settings", "link-model", bytes([n + 1]) + b"node:1us:6GB,island:50us:1.25GB,top:200us:0.125GB")
    write("settings", "ib-hca", bytes([n + 2]) + b"^=mlx5_0:1,mlx5_1")
    write("settings", "ucx-tls", bytes([n + 3]) + b"^tcp,sm:aux")


def launch_env():
    def env(pmix, **kv):
        return bytes([pmix]) + "".join(f"{k}={v}\n" for k, v in kv.items()).encode()
    write("launch_env", "strata-run", env(0, STRATA_RANK=1, STRATA_WORLD_SIZE=4, STRATA_LOCAL_RANK=1,
                                          STRATA_LOCAL_SIZE=4, STRATA_ROOT="127.0.0.1:29400"))
    write("launch_env", "torchrun", env(0, RANK=3, WORLD_SIZE=8, LOCAL_RANK=3, LOCAL_WORLD_SIZE=4,
                                        MASTER_ADDR="fe80::1", MASTER_PORT=29500, TORCHELASTIC_RUN_ID="job7"))
    write("launch_env", "mpirun", env(1, OMPI_COMM_WORLD_RANK=0, OMPI_COMM_WORLD_SIZE=2,
                                      OMPI_COMM_WORLD_LOCAL_RANK=0, OMPI_COMM_WORLD_LOCAL_SIZE=2,
                                      OMPI_MCA_ess_base_jobid="123", PMIX_NAMESPACE="prterun-1"))
    write("launch_env", "slurm", env(0, SLURM_PROCID=5, SLURM_STEP_NUM_TASKS=7, SLURM_LOCALID=1, SLURM_NODEID=2,
                                     SLURM_STEP_TASKS_PER_NODE="2(x3),1", SLURM_JOB_ID=4242, SLURM_STEP_ID=0,
                                     SLURM_STEP_NODELIST="gpu[07-09,12],cpu1", STRATA_ROOT_PORT=0))
    write("launch_env", "pmix-only", env(1, PMIX_RANK=0, PMIX_NAMESPACE="ns"))
    write("launch_env", "root-file", env(0, RANK=0, WORLD_SIZE=1, STRATA_ROOT_FILE="/tmp/f"))


def ucx_conn_info():
    def enc(addr, region=0, slot_bytes=0, slots=0, rkey=b""):
        return (b"SUX1" + struct.pack("<I", len(addr)) + addr + struct.pack("<QQII", region, slot_bytes, slots, len(rkey)) +
                rkey)
    write("ucx_conn_info", "tag-only", enc(b"\x01ucx-worker-address"))
    write("ucx_conn_info", "puts", enc(b"addr", 0x7F0000001000, 262144, 4, b"packed-rkey"))
    write("ucx_conn_info", "empty-address", enc(b""))


def ib_wire():
    def qp(qpn=0x11, psn=0x22, lid=3, port=1, link=1, mtu=5, gid_index=0, device=b"mlx5_0"):
        return (struct.pack("<IIHBBBBH", qpn, psn, lid, port, link, mtu, gid_index, 0) + bytes(range(16)) +
                struct.pack("<QIIIIQ", 0x7F0000002000, 0x99, 8, 524288, 0x98, 0x7F0000003000) + device.ljust(32, b"\0"))
    def enc(qps):
        body = b"".join(qps)
        head = struct.pack("<IHHI", 0x56424953, 1, len(qps), len(body)) + body
        return head + struct.pack("<I", fnv1a32(head))
    write("ib_wire", "one-qp", b"\0" + enc([qp()]))
    write("ib_wire", "two-ports-roce", b"\0" + enc([qp(), qp(qpn=0x12, lid=0, link=2, port=2, device=b"mlx5_1")]))
    write("ib_wire", "bad-sum-fixed", b"\1" + enc([qp()])[:-4] + b"\0\0\0\0")


def bootstrap():
    hello = struct.pack("<Q", 0x5354524154413031) + SECRET + struct.pack("<QiiiI", TAG, 1, 2, 1, 0)
    def info(addr, host, nsocks=2, machine=b"boot-id", cpus=(0x3,)):
        listen = addr.ljust(128, b"\0") + struct.pack("<II", len(addr), 0)
        cpu_words = struct.pack("<16Q", *(list(cpus) + [0] * (16 - len(cpus))))
        return listen + host.ljust(160, b"\0") + struct.pack("<ii", nsocks, 0) + machine.ljust(40, b"\0") + cpu_words
    one_host = info(sockaddr_in("10.0.0.1", 4000), b"hostA/boot/ns")
    other = info(sockaddr_in6("fd00::2", 4001), b"hostB/boot/ns", nsocks=16, machine=b"boot-b", cpus=(0x1, 0x1))
    write("bootstrap", "two-ranks", b"\0" + hello + bytes([1]) + one_host + other)
    write("bootstrap", "planted", b"\7" + hello + bytes([0]) + one_host)
    write("bootstrap", "unterminated-host", b"\3" + hello + bytes([0]) +
          info(sockaddr_in("10.0.0.1", 4000), b"h" * 160))
    write("bootstrap", "hello-only", b"\0" + hello)


# One package, a GPU and an InfiniBand NIC behind one PCI switch (hwloc 2 XML).
PCI_XML = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x00000003" complete_cpuset="0x00000003" allowed_cpuset="0x00000003" nodeset="0x00000001" complete_nodeset="0x00000001" allowed_nodeset="0x00000001" gp_index="1">
    <object type="Package" os_index="0" cpuset="0x00000003" complete_cpuset="0x00000003" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="2">
      <object type="NUMANode" os_index="0" cpuset="0x00000003" complete_cpuset="0x00000003" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="3" local_memory="1073741824"/>
      <object type="Core" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="4">
        <object type="PU" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="5"/>
      </object>
      <object type="Core" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="6">
        <object type="PU" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="7"/>
      </object>
      <object type="Bridge" gp_index="8" bridge_type="0-1" depth="0" bridge_pci="0000:[00-02]">
        <object type="Bridge" gp_index="9" bridge_type="1-1" depth="1" bridge_pci="0000:[01-02]" pci_busid="0000:00:01.0" pci_type="0604 [8086:3c08] [000f:0000] 07 00">
          <object type="PCIDev" gp_index="10" pci_busid="0000:01:00.0" pci_type="0302 [10de:1db4] [10de:1212] a1 00">
            <object type="OSDev" gp_index="11" name="cuda0" subtype="CUDA" osdev_type="5">
              <info name="GPUModel" value="Tesla V100"/>
            </object>
          </object>
          <object type="PCIDev" gp_index="12" pci_busid="0000:02:00.0" pci_type="0207 [15b3:101b] [15b3:0008] 00 00">
            <object type="OSDev" gp_index="13" name="ib0" osdev_type="2">
              <info name="Address" value="00:00:10:87:fe:80"/>
            </object>
            <object type="OSDev" gp_index="14" name="mlx5_0" osdev_type="3"/>
          </object>
        </object>
      </object>
    </object>
  </object>
</topology>
"""


def topology_xml():
    write("topology_xml", "pci-gpu-nic.xml", PCI_XML)
    src = os.path.join(ROOT, "tests/topology/data/power8-4gpu-nvlink.xml")
    shutil.copy(src, os.path.join(HERE, "corpus/topology_xml/seed-power8-4gpu-nvlink.xml"))
    lstopo = shutil.which("lstopo-no-graphics")
    if lstopo:  # small synthetic machines (no PCI)
        for name, desc in [("2pack", "pack:2 core:2 pu:2"), ("numa", "pack:2 numa:2 core:1 pu:1")]:
            xml = subprocess.run([lstopo, "-i", desc, "--of", "xml", "-"], capture_output=True, check=True).stdout
            write("topology_xml", name + ".xml", xml)


def train_data():
    text = b"First Citizen:\nBefore we proceed any further, hear me speak.\n"
    write("train_data", "ctx8", bytes([7]) + text)
    write("train_data", "smallest", bytes([0]) + b"0123456789abcdefghij")  # ctx 1, 20 bytes
    write("train_data", "binary", bytes([3]) + bytes(range(256)))


def checkpoint():
    def ckpt(num_params, step=5):
        payload = struct.pack(f"<{3 * num_params}f", *[0.5] * (3 * num_params))
        head = (b"STRATGPT" + struct.pack("<II", 1, 128) + struct.pack("<6I", 256, 64, 4, 4, 128, 16) +
                struct.pack("<QQ4QQQQ", 1337, step, 1, 2, 3, 4, 10, num_params, len(payload)) +
                struct.pack("<Q", fnv1a64(payload)))
        return head + struct.pack("<Q", fnv1a64(head)) + payload
    write("checkpoint", "valid", b"\0" + ckpt(2))
    write("checkpoint", "empty-model", b"\0" + ckpt(0))
    write("checkpoint", "truncated-fixed", b"\3" + ckpt(4)[:-8])


for make in (unique_id, settings, launch_env, ucx_conn_info, ib_wire, bootstrap, topology_xml, train_data, checkpoint):
    make()
