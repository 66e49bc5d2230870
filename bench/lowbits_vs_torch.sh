#!/bin/bash
# bench/lowbits_vs_torch.sh [BUILD_DIR] [THREADS]: bench/lowbits.c (cft's
# bf16, int8 and 2:4 lines) and bench/peers/quant_torch.py (torch's FX int8
# quantization of the same MLP on the same data) in one run, cft first.
# torch is a peer, never a dependency: without it only cft's lines print.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build}
threads=${2:-$(nproc)}
export CFT_DATA_DIR=${CFT_DATA_DIR:-$src/data}
"$build/bench/lowbits" --threads "$threads"
py=/usr/bin/python3
if $py -c "import torch" 2>/dev/null; then
    $py "$src/bench/peers/quant_torch.py" --threads "$threads"
else
    echo "lowbits_vs_torch: no torch for $py (apt-get install python3-torch); nothing compared"
fi
