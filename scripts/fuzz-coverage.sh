#!/usr/bin/env bash
# Line coverage of the loaders of outside bytes, reached by the fuzz
# corpora (after scripts/fuzz.sh has grown them in build-fuzz/corpus): the
# targets are built again with clang's source-based coverage, each corpus is
# replayed once (-runs=0), and llvm-cov reports the lines of the loader files
# each target drives.
#   bash scripts/fuzz.sh && bash scripts/fuzz-coverage.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
cov="-fprofile-instr-generate -fcoverage-mapping"
CC=clang cmake -S . -B build-fuzzcov -DCFT_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug \
    -DCFT_BUILD_TESTS=OFF -DCFT_BUILD_EXAMPLES=OFF -DCFT_BUILD_BENCH=OFF \
    -DCMAKE_C_FLAGS="$cov" -DCMAKE_EXE_LINKER_FLAGS="$cov" >/dev/null
# target: the files of the loader it drives
declare -A files=(
    [fuzz_export]="src/nn/export.c src/trace/ir_parse.c src/nn/safetensors_header.c src/nn/safetensors_load.c"
    [fuzz_ir_parse]="src/trace/ir_parse.c"
    [fuzz_checkpoint_load]="src/nn/checkpoint_load.c src/nn/checkpoint_meta.c src/nn/safetensors_header.c src/nn/safetensors_load.c"
    [fuzz_checkpoint_meta]="src/nn/checkpoint_meta.c"
)
# the functions each loader runs ("*": all in its files but the writers)
declare -A loader=(
    [fuzz_export]="*"
    [fuzz_ir_parse]="*"
    [fuzz_checkpoint_meta]="*"
    [fuzz_checkpoint_load]="cft_checkpoint_load cft_checkpoint_list read_meta find fail load_piece copy_rows open_file entry_cmp entry_named close_files cft__ckpt_rows cft__ckpt_file_ok cft__ckpt_parse get_int parse_tensor by_name cft__st_open read_at rd_u64 rd_u32 rd_u16 cft__st_read_at cft__st_check_entry check_entry cft__st_dtype_of cft__st_name_of cft__st_parse_header ws expect string put u4 hex set_add hash metadata tensor count cft__st_header_free"
)
targets=${FUZZ_TARGETS:-fuzz_export fuzz_checkpoint_load}
cmake --build build-fuzzcov -j2 --target $targets >/dev/null
cd build-fuzzcov
export ASAN_OPTIONS=detect_leaks=0
for t in $targets; do
    corpus=$root/build-fuzz/corpus/$t
    [ -d "$corpus" ] || { echo "fuzz-coverage: no corpus $corpus (run scripts/fuzz.sh)"; exit 1; }
    rm -f "$t".profraw
    LLVM_PROFILE_FILE="$t.profraw" ./"$t" -runs=0 -detect_leaks=0 "$corpus" >"$t.cov.log" 2>&1
    llvm-profdata merge -sparse "$t.profraw" -o "$t.profdata"
    srcs=()
    for f in ${files[$t]}; do
        [ -f "$root/$f" ] && srcs+=("$root/$f")
    done
    echo "fuzz-coverage: $t ($(ls "$corpus" | wc -l) inputs)"
    llvm-cov report ./"$t" -instr-profile="$t.profdata" "${srcs[@]}" |
        awk 'NR == 1 || /\.c / || /^TOTAL/ { print "    " $0 }'
    # the loader's own functions (the files also hold writers and other readers)
    llvm-cov report ./"$t" -instr-profile="$t.profdata" --show-functions "${srcs[@]}" |
        awk -v want="${loader[$t]}" 'BEGIN { n = split(want, w, " "); for (i = 1; i <= n; i++) keep[w[i]] = 1 }
            NF >= 10 && $1 != "Name" && $1 != "TOTAL" {
                f = $1; sub(/^.*:/, "", f)
                if (!(f in keep) && !("*" in keep && $1 !~ /^(cft_export|cft_export_ir|cft__ckpt_format)$/)) next
                lines += $(NF - 5); missed += $(NF - 4)
            }
            END { printf "    loader functions: %d of %d lines, %.1f%%\n", lines - missed, lines,
                         lines ? 100 * (lines - missed) / lines : 0 }'
done
