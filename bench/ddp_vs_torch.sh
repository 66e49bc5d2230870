#!/bin/bash
# bench/ddp_vs_torch.sh [BUILD_DIR] [ROUNDS]: a DDP training step on 2 ranks
# (one thread each), cft (bench/dist/ddp_train.c under mpirun) against torch
# DDP over gloo (bench/peers/ddp_torch.py), the two sides run alternately
# ROUNDS times (default 3). Prints each side's median of the rounds' medians,
# for the whole step and the Adam step alone, with ratio_to_baseline = cft /
# torch. torch is a peer, never a dependency: without it this says so.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build}
rounds=${2:-3}
py=/usr/bin/python3
if ! $py -c "import torch" 2>/dev/null; then
    echo "ddp_vs_torch: no torch for $py (apt-get install python3-torch); nothing compared"
    exit 0
fi
mpi=(mpirun -np 2 --oversubscribe --mca pml ob1 --mca btl self,vader --mca oob_tcp_if_include lo)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for r in $(seq "$rounds"); do
    "${mpi[@]}" "$build/bench/ddp_train" --threads 1 --rounds 20 >> "$out/cft.jsonl"
    $py "$src/bench/peers/ddp_torch.py" --threads 1 --rounds 20 >> "$out/torch.jsonl"
done
$py - "$out" <<'PY'
import json, statistics, sys
d = sys.argv[1]
rows = [json.loads(l) for f in ("cft.jsonl", "torch.jsonl") for l in open(f"{d}/{f}")]
ms = {}
for r in rows:
    ms.setdefault((r["config"]["what"], r["method"]), []).append(r["ms"])
cfg = rows[0]["config"]
for what in ("training step", "optimizer step"):
    med = {m: statistics.median(v) for (w, m), v in ms.items() if w == what}
    for m, v in sorted(med.items()):
        print(json.dumps({"bench": "ddp_vs_torch", "config": {
            "model": cfg["model"], "batch_per_rank": cfg["batch_per_rank"], "ranks": 2,
            "threads_per_rank": 1, "optimizer": "adam", "what": what,
            "rounds": len(ms[(what, m)])}, "method": m, "ms": round(v, 4),
            "baseline": "torch 1.13 DDP (gloo)",
            "ratio_to_baseline": round(v / med["torch_ddp"], 3)}))
PY
