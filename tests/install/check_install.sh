#!/usr/bin/env bash
# Installs the build into a temporary prefix, builds examples/all_reduce.cpp against the
# installed tree with find_package(strata) and with pkg-config (the source tree's headers
# are not on either command line), and runs both on 2 ranks with the installed strata-run.
# With the torch backend built, the installed Python package runs
# examples/torch_all_reduce.py on 2 ranks too, on the installed libstrata.
#   check_install.sh BUILD_DIR SOURCE_DIR [PYTHON_WITH_TORCH]
set -euo pipefail
build=$1 src=$2 python=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null

cmake -S "$src/examples" -B "$tmp/with-cmake" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$tmp/with-cmake" >/dev/null

pc_dir=$(dirname "$(find "$prefix" -name strata.pc | head -1)")
export PKG_CONFIG_PATH=$pc_dir
libdir=$(pkg-config --variable=libdir strata)
c++ -std=c++20 "$src/examples/all_reduce.cpp" -o "$tmp/with-pkg-config" $(pkg-config --cflags --libs strata) \
    -Wl,-rpath,"$libdir"

for exe in "$tmp/with-cmake/all_reduce_example" "$tmp/with-pkg-config"; do
  out=$("$prefix/bin/strata-run" -n 2 -- "$exe")
  echo "$out"
  if [ "$(grep -c 'passed (0 wrong' <<<"$out")" != 2 ]; then
    echo "FAIL: $exe did not pass on both ranks"
    exit 1
  fi
done

# The installed tools load the installed library, not the build tree's.
libs=$(ldd "$prefix/bin/strata-perf")
if ! grep -q "$prefix/.*libstrata.so" <<<"$libs"; then
  echo "$libs"
  echo "FAIL: the installed strata-perf does not load the installed libstrata"
  exit 1
fi
# The installed strata-perf --api nccl loads the installed libnccl.so.2, which loads the
# installed libstrata.
out=$("$prefix/bin/strata-run" -n 2 -- "$prefix/bin/strata-perf" all_reduce --api nccl -b 8 -e 8 -n 1 -w 0)
if ! grep -q "# nccl: $prefix/.*/strata-nccl/libnccl.so.2" <<<"$out" || ! grep -q "Out of bounds values : 0 OK" <<<"$out"; then
  echo "$out"
  echo "FAIL: the installed strata-perf --api nccl did not run on the installed libnccl.so.2"
  exit 1
fi
# ldd's output captured first (as below): under pipefail, grep -q leaving at its first match
# can kill ldd with SIGPIPE and fail the pipeline although the library was found (it did,
# once, in a clean-clone .ci/run).
nccl_libs=$(ldd "$(find "$prefix" -name libnccl.so.2 | head -1)")
if ! grep -q "$prefix/.*libstrata.so" <<<"$nccl_libs"; then
  echo "$nccl_libs"
  echo "FAIL: the installed libnccl.so.2 does not load the installed libstrata"
  exit 1
fi
torch=""
if [ -n "$python" ]; then
  module=$(find "$prefix" -name '_torch_backend*.so' | head -1)
  if [ -z "$module" ]; then
    echo "FAIL: the torch backend was built but not installed under $prefix"
    exit 1
  fi
  # ldd's output captured first: under pipefail, grep -q exiting at the first match can
  # kill ldd with SIGPIPE and fail the pipeline although the library was found.
  module_libs=$(ldd "$module")
  if ! grep -q "$prefix/.*libstrata.so" <<<"$module_libs"; then
    echo "$module_libs"
    echo "FAIL: the installed torch backend does not load the installed libstrata"
    exit 1
  fi
  out=$(PYTHONPATH=$(dirname "$(dirname "$module")") "$prefix/bin/strata-run" -n 2 -- "$python" "$src/examples/torch_all_reduce.py")
  echo "$out"
  if [ "$(grep -c 'floats passed' <<<"$out")" != 2 ]; then
    echo "FAIL: the installed torch backend did not pass on both ranks"
    exit 1
  fi
  torch="; the installed torch backend passed on 2 ranks"
fi
echo "install: built against the installed tree with find_package and pkg-config; both passed on 2 ranks; strata-perf --api nccl ran on the installed libnccl.so.2$torch"
