#!/usr/bin/env bash
# Install a build of cft into a temporary prefix and build and run a
# consumer project against it four ways: CMake find_package (shared,
# static) and pkg-config (cft.pc shared, cft-static.pc static), with the
# README's compile lines. Usage: scripts/test-consumer.sh BUILD_DIR
set -euo pipefail
build="$(cd "$1" && pwd)"
src="$(cd "$(dirname "$0")/.." && pwd)/tests/consumer"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
# the prefix moved after install: pkg-config must still find it (relocatable)
mv "$tmp/prefix" "$tmp/moved"
prefix="$tmp/moved"
libdir="$(dirname "$(find "$prefix" -name cft.pc | head -1)")/.."
for link in cft cft_static; do
    cmake -S "$src" -B "$tmp/cmake-$link" -DCMAKE_PREFIX_PATH="$prefix" -DCFT_LINK=$link \
        -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$tmp/cmake-$link" >/dev/null
    LD_LIBRARY_PATH="$libdir" "$tmp/cmake-$link/app"
done
export PKG_CONFIG_PATH="$libdir/pkgconfig"
if pkg-config --cflags cft | grep -q -- -D; then
    echo "cft.pc exports defines: $(pkg-config --cflags cft)"; exit 1
fi
cc -std=c11 "$src/app.c" -o "$tmp/pc-shared" $(pkg-config --cflags --libs cft) -lm \
    -Wl,-rpath,"$libdir"
"$tmp/pc-shared"
cc -std=c11 "$src/app.c" -o "$tmp/pc-static" $(pkg-config --cflags --libs --static cft-static) -lm
if ldd "$tmp/pc-static" | grep -q libcft; then
    echo "the static build links libcft.so"; exit 1
fi
"$tmp/pc-static"
echo "consumer: find_package shared and static, pkg-config shared and static: ok"
