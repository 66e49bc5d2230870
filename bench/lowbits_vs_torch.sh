#!/bin/bash
# bench/lowbits_vs_torch.sh [BUILD_DIR] [THREADS]: bench/autocast.c (the
# flagship programs under bf16 autocast), bench/lowbits.c (cft's bf16, int8
# and 2:4 lines) and bench/peers/quant_torch.py (torch's FX int8
# quantization of the same MLP and CNN on the same data) in one run, cft
# first; then bench/peers/lowbits_targets.py's verdict on issue 33's goals
# from cft's lines. torch is a peer, never a dependency: without it only
# cft's lines print. On an AMX / VNNI machine this one command measures
# everything the issue asks for.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build}
threads=${2:-$(nproc)}
export CFT_DATA_DIR=${CFT_DATA_DIR:-$src/data}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$build/bench/autocast" --threads "$threads" | tee -a "$out"
"$build/bench/lowbits" --threads "$threads" | tee -a "$out"
py=/usr/bin/python3
if $py -c "import torch" 2>/dev/null; then
    $py "$src/bench/peers/quant_torch.py" --threads "$threads" | tee -a "$out"
else
    echo "lowbits_vs_torch: no torch for $py (apt-get install python3-torch); nothing compared"
fi
python3 "$src/bench/peers/lowbits_targets.py" "$out"
