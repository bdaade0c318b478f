#!/usr/bin/env python3
"""Strata's libnccl.so.2 against NVIDIA's: every nccl*/pnccl* symbol NVIDIA's library
defines is defined in ours, ours exports nothing else, and its SONAME is libnccl.so.2.

    abi_symbols.py NVIDIA_LIBNCCL OURS_LIBNCCL
Exit 77 (ctest's skip) when NVIDIA's library is not installed.
"""
import os
import re
import subprocess
import sys


def defined(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


def main():
    nvidia, ours = sys.argv[1], sys.argv[2]
    if not os.path.exists(nvidia):
        print("skipped: NVIDIA's libnccl.so.2 is not installed (CUDA toolkit)")
        return 77
    theirs = {s for s in defined(nvidia) if re.match(r"p?nccl", s)}
    mine = defined(ours)
    missing = sorted(theirs - mine)
    extra = sorted(s for s in mine if not re.match(r"p?nccl", s))
    dyn = subprocess.run(["readelf", "-d", ours], capture_output=True, text=True, check=True).stdout
    soname = re.search(r"SONAME.*\[(.*)\]", dyn)
    for s in missing:
        print("missing from Strata's library:", s)
    for s in extra:
        print("exported but not NCCL's:", s)
    if not soname or soname.group(1) != "libnccl.so.2":
        print("SONAME is", soname.group(1) if soname else "absent", "- expected libnccl.so.2")
    ok = not missing and not extra and soname and soname.group(1) == "libnccl.so.2"
    print("nccl symbols: %d of NVIDIA's %d present%s" % (len(theirs) - len(missing), len(theirs),
                                                         "" if ok else "; FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
