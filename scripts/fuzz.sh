#!/usr/bin/env bash
# Build the libFuzzer targets (clang, ASan+UBSan) and run each one from its
# seed corpus (written by the library itself, tests/fuzz/make_seeds.c).
#   bash scripts/fuzz.sh              # 60 s per target (what CI runs)
#   FUZZ_SECONDS=1800 bash scripts/fuzz.sh   # longer
#   FUZZ_TARGETS=fuzz_bool bash scripts/fuzz.sh   # one target
# Corpora grow in build-fuzz/corpus/<target>; a finding stops the run with
# its input saved as build-fuzz/crash-* (rerun: build-fuzz/<target> <file>).
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${FUZZ_SECONDS:-60}"
CC=clang cmake -S . -B build-fuzz -DCFT_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug \
    -DCFT_BUILD_TESTS=OFF -DCFT_BUILD_EXAMPLES=OFF -DCFT_BUILD_BENCH=OFF >/dev/null
cmake --build build-fuzz -j2 >/dev/null
cd build-fuzz
mkdir -p corpus/fuzz_safetensors corpus/fuzz_bool corpus/fuzz_rpc_header \
    corpus/fuzz_checkpoint_meta corpus/fuzz_ir_parse corpus/fuzz_export \
    corpus/fuzz_checkpoint_load
# the GC is off in sanitizer builds, so memory is never freed: no leak
# reports, and room for the growth of a long run
export ASAN_OPTIONS=detect_leaks=0
./make_seeds corpus/fuzz_safetensors corpus/fuzz_bool corpus/fuzz_rpc_header \
    corpus/fuzz_checkpoint_meta corpus/fuzz_ir_parse corpus/fuzz_export \
    corpus/fuzz_checkpoint_load
# an exported program is a safetensors file: its header parser starts from those seeds too
cp -n corpus/fuzz_safetensors/* corpus/fuzz_export/ 2>/dev/null || true
# Without the GC nothing is freed (3-12 KB per execution, and fast targets
# run 12,000 executions a second), so a run goes in rounds of at most 10 s
# (each a fresh process on the grown corpus): about 1.5 GB at most. Rounds
# of 30 s once reached the 4 GB limit (fuzz_ir_parse, 340,000 executions).
for t in ${FUZZ_TARGETS:-fuzz_safetensors fuzz_bool fuzz_rpc_header fuzz_checkpoint_meta fuzz_ir_parse fuzz_export fuzz_checkpoint_load}; do
    echo "fuzz: $t for ${secs} s"
    left=$secs total=0
    while [ "$left" -gt 0 ]; do
        round=$((left < 10 ? left : 10))
        if ! ./"$t" -max_total_time="$round" -detect_leaks=0 -rss_limit_mb=4096 \
            -print_final_stats=1 "corpus/$t" >"$t.log" 2>&1; then
            tail -60 "$t.log"
            echo "fuzz: $t found a problem (input saved as build-fuzz/crash-*)"
            exit 1
        fi
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$t.log")
        total=$((total + ${runs:-0}))
        left=$((left - round))
    done
    echo "fuzz: $t: $total executions, corpus $(ls "corpus/$t" | wc -l) inputs, no finding"
done
