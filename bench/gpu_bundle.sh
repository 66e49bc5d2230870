#!/bin/bash
# bench/gpu_bundle.sh [BUILD_DIR] [TARBALL]: on the build machine (Debian,
# with the CUDA toolkit, so that libcft_cuda.so is built), packs what
# bench/gpu.sh needs on a GPU machine that has none of cft's Debian
# dependencies: the GPU tests and device benches, libcft and the CUDA
# backend, ctest's files for the build, the digits data, and every shared
# library they load that is not the C runtime (copied into BUILD_DIR/deps,
# which gpu.sh puts on LD_LIBRARY_PATH). The paths inside are absolute:
# unpack with `tar xJf TARBALL -C /` and run `bench/gpu.sh` from the same
# source tree path. CUDA's own libraries are not packed: the backend finds
# them where the GPU machine has them. TARBALL defaults to
# .gpu/bundle.tar.xz (add .gpu to .git/info/exclude to carry it). About
# 20 MB.
set -eu
R=$(cd "$(dirname "$0")/.." && pwd)
B=$(cd "${1:-$R/build}" && pwd)
T=${2:-$R/.gpu/bundle.tar.xz}
mkdir -p "$(dirname "$T")" "$B/deps"
bins=""
for f in test_prims test_flagship_device test_device_graph test_device_linalg test_device_big \
    test_cuda_plugin bench/per_sample_grads bench/ensemble bench/maml bench/dp_sgd; do
    [ -x "$B/$f" ] && bins="$bins $B/$f"
done
libs=$(ls "$B"/libcft*.so* 2>/dev/null || true)
# the shared libraries they load, less the C runtime and CUDA's own
ldd $bins $libs 2>/dev/null | awk '$3 ~ /^\// {print $3}' | sort -u |
    grep -vE '/libcft|/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so|/libcuda\.so|/libnvrtc|/libcublas|/libcufft|/libcusolver|/libnccl' |
    while read -r l; do cp -L "$l" "$B/deps/"; done
files="$bins $libs $B/deps"
for f in "$B"/CTestTestfile.cmake "$B"/DartConfiguration.tcl; do [ -e "$f" ] && files="$files $f"; done
[ -d "$R/data" ] && files="$files $R/data"
tar cJf "$T" -P $files
echo "$T: $(du -h "$T" | cut -f1) ($(echo $bins | wc -w) binaries, $(ls "$B/deps" | wc -l) libraries)"
