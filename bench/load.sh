#!/usr/bin/env bash
# The flagship benches' thread scaling on a quiet machine and on a busy
# one, in one run: per-sample gradients (B = 64, 256, 1024), the DP-SGD
# clipped step, MAML (T = 5, 25, 100) and the ensemble, each at the default
# thread count against one thread (bench_scaling, alternating rounds),
# first with no load, then with one CPU-bound helper process per core
# (--load N, started and stopped by the bench). Prints the JSON lines of
# the *_threads_scaling methods, each with "load" and ratio_to_baseline
# (default threads / one thread; under load, of the median rounds).
# Usage: bench/load.sh [BUILD_DIR] [N]   (N: helpers, default the cores)
set -euo pipefail
build="${1:-build}"
n="${2:-$(nproc)}"
cd "$(dirname "$0")/.."
for load in 0 "$n"; do
    for b in per_sample_grads dp_sgd maml ensemble; do
        "$build/bench/$b" --load "$load" 2>/dev/null | grep '_threads_scaling' || true
    done
done
