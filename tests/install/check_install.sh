#!/usr/bin/env bash
# Installs the build into a temporary prefix, builds examples/all_reduce.cpp against the
# installed tree with find_package(strata) and with pkg-config (the source tree's headers
# are not on either command line), and runs both on 2 ranks with the installed strata-run.
#   check_install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
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
echo "install: built against the installed tree with find_package and pkg-config; both passed on 2 ranks"
