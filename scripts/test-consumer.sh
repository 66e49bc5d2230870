#!/usr/bin/env bash
# Install a build of cft into a temporary prefix, move the prefix, and
# build and run consumer projects against it: CMake find_package (cft::cft,
# cft::cft_static) and pkg-config (cft.pc, cft-static.pc) with the README's
# compile lines; with the distributed library, a DDP and an RPC program
# (cft::dist, cft::dist_static, cft-dist.pc) under mpirun -np 2; with the
# CUDA backend installed, its loading path from the moved prefix (the
# plug-in must load and give its own reason, such as no CUDA driver).
# Usage: scripts/test-consumer.sh BUILD_DIR
set -euo pipefail
build="$(cd "$1" && pwd)"
src="$(cd "$(dirname "$0")/.." && pwd)/tests/consumer"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
# the prefix moved after install: pkg-config, CMake and the CUDA plug-in must
# still find it (relocatable)
mv "$tmp/prefix" "$tmp/moved"
prefix="$tmp/moved"
libdir="$(cd "$(dirname "$(find "$prefix" -name cft.pc | head -1)")/.." && pwd)"
if grep -rlF "$build" "$prefix" >/dev/null; then
    echo "the install refers to the build tree: $(grep -rlF "$build" "$prefix" | head -3)"; exit 1
fi
mpirun=(mpirun --allow-run-as-root --oversubscribe -np 2 --mca pml ob1 --mca btl self,vader
        --mca oob_tcp_if_include lo)
dist=no
[ -f "$libdir/libcft_dist.so" ] && dist=yes
cuda=no
[ -f "$libdir/libcft_cuda.so" ] && cuda=yes
[ "$dist" = yes ] && [ ! -f "$libdir/libcft_dist.a" ] && { echo "libcft_dist.a not installed"; exit 1; }
run_mpi() { # a program under mpirun, with a deadline
    CFT_DIST_TIMEOUT=30 timeout 120 "${mpirun[@]}" "$@"
}
for link in cft cft_static; do
    cmake -S "$src" -B "$tmp/cmake-$link" -DCMAKE_PREFIX_PATH="$prefix" -DCFT_LINK=$link \
        -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$tmp/cmake-$link" >/dev/null
    LD_LIBRARY_PATH="$libdir" "$tmp/cmake-$link/app"
    if [ "$cuda" = yes ]; then # a static program outside the prefix is told where it is
        plug=""; [ $link = cft_static ] && plug="$libdir/libcft_cuda.so"
        CFT_CUDA_PLUGIN="$plug" LD_LIBRARY_PATH="$libdir" "$tmp/cmake-$link/cuda"
    fi
    if [ "$dist" = yes ]; then
        run_mpi -x LD_LIBRARY_PATH="$libdir" "$tmp/cmake-$link/ddp"
        run_mpi -x LD_LIBRARY_PATH="$libdir" "$tmp/cmake-$link/rpc"
    fi
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
if [ "$cuda" = yes ]; then
    cc -std=c11 "$src/cuda.c" -o "$tmp/pc-cuda" $(pkg-config --cflags --libs cft) -Wl,-rpath,"$libdir"
    "$tmp/pc-cuda"
fi
if [ "$dist" = yes ]; then
    for prog in ddp rpc; do
        cc -std=c11 "$src/$prog.c" -o "$tmp/pc-$prog" $(pkg-config --cflags --libs cft-dist) -lm \
            -Wl,-rpath,"$libdir"
        run_mpi "$tmp/pc-$prog"
        cc -std=c11 "$src/$prog.c" -o "$tmp/pc-$prog-static" \
            $(pkg-config --cflags --libs --static cft-dist-static) -lm
        if ldd "$tmp/pc-$prog-static" | grep -q libcft; then
            echo "the static $prog links a shared libcft"; exit 1
        fi
        run_mpi "$tmp/pc-$prog-static"
    done
fi
echo "consumer: find_package and pkg-config, shared and static: ok; distributed (DDP, RPC" \
     "under mpirun -np 2): $dist; CUDA plug-in from the moved prefix: $cuda"
