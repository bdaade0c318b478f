#!/usr/bin/env python3
"""Fails when a library folder includes a folder of a higher layer (docs/architecture.md).

Layers, lowest first: ground; algorithms and transports (beside each other, neither
includes the other); core; api (core and api live under src/, which is on the include
path, so their headers are included as "core/..." and "api/..."). Public headers (include/) are the contract every layer
may use. Tools (src/launcher, src/topology, perf, training) are above the library: nothing in
the library may include them. They include the public headers, ground/ and algorithms/,
their own and each other's files, and of core/ and transports/ only the headers
TOOL_REACHES_IN names, each with its reason; nothing of api/ or src/nccl. Front ends
outside the library (python/: the torch backend; src/nccl: libnccl.so.2, included as
"nccl/..." since src/ is on the include path) use the public headers and their own files
only. CUDA's headers
(and .cu files) belong to the folders that talk to the GPU: the CUDA device backend, the
IPC link and the trainer's CUDA kernels; everything else reaches the device through
ground/device's interfaces, so it builds and runs without CUDA. Prints one line per
offending include, then a verdict.
"""
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# Which layers each library layer may include ("strata/..." is include/).
MAY_INCLUDE = {
    "ground": {"ground"},
    "algorithms": {"ground", "algorithms"},
    "transports": {"ground", "transports"},
    "core": {"ground", "algorithms", "transports", "core"},
    "api": {"ground", "algorithms", "transports", "core", "api"},
}
# Where each layer's files are, relative to the root (its include name is the layer).
FOLDER = {"core": "src/core", "api": "src/api"}
# Folders that may include only public headers and files of their own folder.
PUBLIC_ONLY = {"python", "src/nccl"}
# The include names of the project's folders: a library layer that includes one of them
# that it may not is flagged ("nccl": src/nccl, reachable as "nccl/..." through src/).
PROJECT_FOLDERS = set(MAY_INCLUDE) | PUBLIC_ONLY | {"nccl", "launcher", "topology", "perf", "training", "tests", "tools",
                                                    "src"}
# The tools: programs above the library (strata-run, strata-topo, perf's benchmarks and
# simulator, strata-train).
TOOLS = ("src/launcher", "src/topology", "perf", "training")
# The library's layers a tool may include, beyond the public headers: the base and the plan
# builders (settings, log, element types, the device layer's interfaces; hierarchy, tuner).
TOOLS_MAY_INCLUDE = {"ground", "algorithms"}
# The library's folders by include name (src/ is on the include path).
LIBRARY = {"ground": "ground", "algorithms": "algorithms", "transports": "transports", "core": "src/core",
           "api": "src/api", "nccl": "src/nccl"}
# The headers of core/ and transports/ a tool may include, and why.
TOOL_REACHES_IN = {
    "core/comm_info.hpp": "what a communicator chose, written for tools (strata-topo, strata-scale-probe)",
    "core/bootstrap/bootstrap.hpp": "strata-sim models the bootstrap table's size (sizeof RankInfo)",
    "transports/shm/shm_segment.hpp": "strata-scale-probe checks the shm segments against their formula",
    "transports/shm/shm_names.hpp": "strata-run removes the segments a job's ranks left (header-only: it links no libstrata)",
}
SOURCES = (".cpp", ".hpp", ".h", ".c", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
# The only folders that may include CUDA's headers or hold .cu files.
CUDA_FOLDERS = ("ground/device/cuda", "transports/ipc", "training/cuda")
# Programs that stand where a CUDA user stands (built against NVIDIA's nccl.h, which
# includes cuda_runtime.h, or checking a GPU on purpose): the rule is about the library
# and its tools reaching the GPU only through ground/device.
CUDA_USERS = ("tests/nccl", "examples")
CUDA_HEADER = re.compile(
    r'^\s*#\s*include\s*[<"]((?:cuda|cublas|cudnn|curand|cufft|cusparse|cusolver|nvrtc|nvml|'
    r'driver_types|vector_types|cooperative_groups)[^>"]*|(?:cub|thrust|cuda|nv)/[^>"]*)[>"]', re.M)


def includes(root, folder):
    """(source file, its folder, included name) for every quoted include below root/folder."""
    for dirpath, _, files in os.walk(os.path.join(root, folder)):
        for f in files:
            if f.endswith(SOURCES):
                path = os.path.join(dirpath, f)
                for inc in INCLUDE.findall(open(path, encoding="utf-8", errors="replace").read()):
                    yield path, dirpath, inc


def project_sources(root):
    """Every source file of the project (build trees and hidden folders skipped)."""
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith((".", "build")) and d != "__pycache__"]
        for f in files:
            if f.endswith(SOURCES):
                yield os.path.join(dirpath, f)


def library_name(root, path):
    """The include name ("core/x.hpp") of a file of the library's folders, else None."""
    rel = os.path.relpath(os.path.realpath(path), os.path.realpath(root))
    for name, folder in LIBRARY.items():
        if rel.startswith(folder + os.sep):
            return name + rel[len(folder):]
    return None


def check(ROOT):
    bad, checked = [], 0
    for layer, allowed in MAY_INCLUDE.items():
        for path, _, inc in includes(ROOT, FOLDER.get(layer, layer)):
            checked += 1
            top = inc.split("/")[0]
            if os.path.exists(os.path.join(ROOT, "include", inc)):
                continue  # a public header
            if "/" not in inc:
                bad.append(f"{os.path.relpath(path, ROOT)}: \"{inc}\" is not path-qualified")
            elif top in allowed:
                continue
            elif top in PROJECT_FOLDERS:
                bad.append(f"{os.path.relpath(path, ROOT)}: {layer} includes \"{inc}\" from {top}")
    for front in PUBLIC_ONLY:
        top_dir = os.path.realpath(os.path.join(ROOT, front))
        for path, dirpath, inc in includes(ROOT, front):
            checked += 1
            if os.path.exists(os.path.join(ROOT, "include", inc)):
                continue
            local = os.path.realpath(os.path.join(dirpath, inc))
            if not (os.path.exists(local) and local.startswith(top_dir + os.sep)):
                bad.append(f"{os.path.relpath(path, ROOT)}: {front} uses the public headers only, not \"{inc}\"")
    for tool in TOOLS:
        for path, dirpath, inc in includes(ROOT, tool):
            checked += 1
            if os.path.exists(os.path.join(ROOT, "include", inc)):
                continue  # a public header
            local = os.path.join(dirpath, inc)
            name = library_name(ROOT, local) if os.path.exists(local) else inc
            top = name.split("/")[0] if name and "/" in name else None
            if top not in LIBRARY or top in TOOLS_MAY_INCLUDE or name in TOOL_REACHES_IN:
                continue  # the tool's own files, another tool's, or what tools may use
            bad.append(f"{os.path.relpath(path, ROOT)}: a tool includes \"{inc}\" from {LIBRARY[top]} (tools use the "
                       "public headers, ground/ and algorithms/, and of core/ and transports/ only the headers "
                       "TOOL_REACHES_IN names)")
    for path in project_sources(ROOT):
        rel = os.path.relpath(path, ROOT)
        if any(rel.startswith(f + os.sep) for f in CUDA_FOLDERS + CUDA_USERS):
            continue
        if path.endswith((".cu", ".cuh")):
            bad.append(f"{rel}: CUDA code outside {', '.join(CUDA_FOLDERS)}")
        for inc in CUDA_HEADER.findall(open(path, encoding="utf-8", errors="replace").read()):
            bad.append(f"{rel}: includes CUDA's <{inc}> (only {', '.join(CUDA_FOLDERS)} may)")
    for b in bad:
        print(b)
    print(f"layers: {checked} includes checked, {len(bad)} against the layering")
    return 1 if bad else 0


def planted_violation_is_caught():
    """A tree whose ground includes core must fail the check (the check can fail)."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        for folder, text in (("ground", '#include "core/engine.hpp"\n'), ("src/core", '#include "ground/log.hpp"\n')):
            os.makedirs(os.path.join(tmp, folder))
            open(os.path.join(tmp, folder, "x.hpp"), "w").write(text)
        caught = check(tmp) == 1
    print("planted upward include:", "caught" if caught else "NOT caught")
    with tempfile.TemporaryDirectory() as tmp:  # a front end reaching into the library
        os.makedirs(os.path.join(tmp, "python", "b"))
        os.makedirs(os.path.join(tmp, "src", "core"))
        open(os.path.join(tmp, "src", "core", "engine.hpp"), "w").write("\n")
        open(os.path.join(tmp, "python", "b", "own.hpp"), "w").write("\n")
        open(os.path.join(tmp, "python", "b", "x.cpp"), "w").write('#include "own.hpp"\n#include "../../src/core/engine.hpp"\n')
        front = check(tmp) == 1
    print("planted front-end include of core:", "caught" if front else "NOT caught")
    with tempfile.TemporaryDirectory() as tmp:  # CUDA outside its folders; inside them it is fine
        for folder, name, text in (("ground/device/cuda", "ok.cpp", "#include <cuda_runtime.h>\n"),
                                   ("ground/device", "x.cpp", "#include <cuda.h>\n"),
                                   ("src/core", "k.cu", "\n")):
            os.makedirs(os.path.join(tmp, folder), exist_ok=True)
            open(os.path.join(tmp, folder, name), "w").write(text)
        cuda = check(tmp) == 1
        os.remove(os.path.join(tmp, "ground/device/x.cpp"))
        os.remove(os.path.join(tmp, "src/core/k.cu"))
        cuda_allowed = check(tmp) == 0
    print("planted CUDA include outside the CUDA folders:", "caught" if cuda else "NOT caught")
    print("CUDA include inside the CUDA backend:", "allowed" if cuda_allowed else "NOT allowed")
    with tempfile.TemporaryDirectory() as tmp:  # core reaching into src/nccl, a front end above it
        os.makedirs(os.path.join(tmp, "src", "nccl"))
        os.makedirs(os.path.join(tmp, "src", "core"))
        open(os.path.join(tmp, "src", "nccl", "comm.hpp"), "w").write("\n")
        open(os.path.join(tmp, "src", "core", "x.cpp"), "w").write('#include "nccl/comm.hpp"\n')
        nccl = check(tmp) == 1
    print("planted core include of src/nccl:", "caught" if nccl else "NOT caught")
    with tempfile.TemporaryDirectory() as tmp:  # tools: what they may include, and two reaches into core
        for folder in ("training", "perf", "src/core", "ground"):
            os.makedirs(os.path.join(tmp, folder))
        open(os.path.join(tmp, "src", "core", "engine.hpp"), "w").write("\n")
        open(os.path.join(tmp, "training", "own.hpp"), "w").write("\n")
        open(os.path.join(tmp, "training", "ok.cpp"), "w").write(
            '#include "own.hpp"\n#include "ground/log.hpp"\n#include "algorithms/tuner.hpp"\n'
            '#include "core/comm_info.hpp"\n#include "topology/topology.hpp"\n')
        tool_allowed = check(tmp) == 0
        open(os.path.join(tmp, "training", "x.cpp"), "w").write('#include "core/engine.hpp"\n')
        tool = check(tmp) == 1
        os.remove(os.path.join(tmp, "training", "x.cpp"))
        open(os.path.join(tmp, "perf", "x.cpp"), "w").write('#include "../src/core/engine.hpp"\n')
        tool_relative = check(tmp) == 1
    print("a tool's includes of its own files, ground, algorithms, a named core header, another tool:",
          "allowed" if tool_allowed else "NOT allowed")
    print("planted tool include of core:", "caught" if tool else "NOT caught")
    print("planted tool include of core by a relative path:", "caught" if tool_relative else "NOT caught")
    return 0 if caught and front and cuda and cuda_allowed and nccl and tool_allowed and tool and tool_relative else 1


def main():
    if sys.argv[1:] == ["--plant-violation"]:
        return planted_violation_is_caught()
    return check(os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else ROOT)


if __name__ == "__main__":
    sys.exit(main())
