#!/bin/bash
# bench/gpu.sh [BUILD_DIR]: everything issue 32 asks to measure on a GPU, in
# one go, building nothing: the GPU tests (ctest -L gpu: the primitives, the
# flagship transforms, graphs, linear algebra, > 2 GiB arrays, the bench
# smoke runs), then cft's device benches (per_sample_grads, ensemble, maml,
# dp_sgd with --device) and the JAX peer (bench/peers/jax_gpu.py, where
# python3 imports jax) at each matrix precision in CFT_GPU_PRECISIONS
# (default "highest high": f32, then TF32 on both sides), and the table of
# the two side by side with cft's per-call device counters
# (bench/peers/gpu_table.py). Run from the source tree; BUILD_DIR defaults
# to build. On a GPU machine without cft's Debian libraries, unpack the
# bundle bench/gpu_bundle.sh makes on the build machine first. Output: $OUT (default gpu-out/): log.txt, ctest_gpu.txt,
# cft.jsonl, jax.jsonl, table.md. CFT_GPU_DEVICE names the device (cuda:0),
# CFT_GPU_TESTS=0 skips the tests, CFT_GPU_JAX=0 the peer. Where no GPU can
# be used the benches exit 77 and the table is empty: nothing fails.
set -u
R=$(cd "$(dirname "$0")/.." && pwd)
B=$(cd "${1:-$R/build}" && pwd) || { echo "gpu.sh: no build directory ${1:-$R/build}"; exit 2; }
O=${OUT:-$R/gpu-out}
DEV=${CFT_GPU_DEVICE:-cuda:0}
mkdir -p "$O"
exec > >(tee "$O/log.txt") 2>&1
t0=$(date +%s)
el() { echo "[t+$(($(date +%s) - t0))s] $*"; }
cd "$R"
el "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null ||
    echo "(no nvidia-smi)"
nproc
export CFT_DATA_DIR=${CFT_DATA_DIR:-$R/data} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
# the build machine's libraries, where bench/gpu_bundle.sh packed them
[ -d "$B/deps" ] && export LD_LIBRARY_PATH="$B/deps${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CFT_CACHE_DIR=${CFT_CACHE_DIR:-$(mktemp -d)} # private (0700): the compiled kernels

if [ "${CFT_GPU_TESTS:-1}" != 0 ]; then
    el "ctest -L gpu"
    (cd "$B" && ctest -L gpu --output-on-failure --timeout 600) > "$O/ctest_gpu.txt" 2>&1
    echo "ctest rc=$?"
    grep -E "tests passed|tests failed|Passed|Failed|Skipped|\*\*\*" "$O/ctest_gpu.txt" | head -30
fi

: > "$O/cft.jsonl"
: > "$O/jax.jsonl"
jax_ok=0
if [ "${CFT_GPU_JAX:-1}" != 0 ] && python3 -c "import jax" 2>/dev/null; then jax_ok=1; fi
for p in ${CFT_GPU_PRECISIONS:-highest high}; do
    for b in per_sample_grads ensemble maml dp_sgd; do
        el "cft $b on $DEV, matmul precision $p"
        timeout 600 "$B/bench/$b" --device "$DEV" --threads "$(nproc)" --matmul-precision "$p" \
            >> "$O/cft.jsonl" 2>> "$O/cft_err.txt"
        echo "$b rc=$? (77: no device)"
    done
    if [ $jax_ok = 1 ]; then
        el "JAX peer, matmul precision $p"
        timeout 900 python3 bench/peers/jax_gpu.py --matmul-precision "$p" >> "$O/jax.jsonl" \
            2>> "$O/jax_err.txt"
        echo "jax rc=$?"
    else
        echo "no JAX here (python3 -c 'import jax' fails, or CFT_GPU_JAX=0): cft alone"
    fi
done
tail -5 "$O/cft_err.txt" 2>/dev/null
tail -5 "$O/jax_err.txt" 2>/dev/null
el "table"
python3 bench/peers/gpu_table.py "$O/cft.jsonl" "$O/jax.jsonl" | tee "$O/table.md"
el "done"
