#!/bin/bash
# bench/optim_vs_torch.sh [BUILD_DIR] [THREADS] [ROUNDS]: the jitted
# optimizer step (bench/optim_step.c) against torch's (bench/peers/
# optim_torch.py, Debian's python3-torch) on the same model, the two sides
# run alternately ROUNDS times (default 3) so that a busy machine falls on
# both. Prints each side's median of the rounds' medians and, per optimizer,
# ratio_to_baseline = cft's donated jitted step / torch's faster variant.
# torch is a peer, never a dependency: without it this says so and exits 0.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build}
threads=${2:-$(nproc)}
rounds=${3:-3}
py=/usr/bin/python3
if ! $py -c "import torch" 2>/dev/null; then
    echo "optim_vs_torch: no torch for $py (apt-get install python3-torch); nothing compared"
    exit 0
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for r in $(seq "$rounds"); do
    "$build/bench/optim_step" --threads "$threads" --rounds 20 >> "$out/cft.jsonl"
    $py "$src/bench/peers/optim_torch.py" --threads "$threads" --rounds 20 >> "$out/torch.jsonl"
done
$py - "$out" <<'PY'
import json, statistics, sys
d = sys.argv[1]
rows = [json.loads(l) for f in ("cft.jsonl", "torch.jsonl") for l in open(f"{d}/{f}")]
ms = {}
for r in rows:
    ms.setdefault((r["config"]["optimizer"], r["method"]), []).append(r["ms"])
cfg = rows[0]["config"]
for opt in sorted({k[0] for k in ms}):
    med = {m: statistics.median(v) for (o, m), v in ms.items() if o == opt}
    torch_best = min(med["torch_default"], med["torch_foreach"])
    for m, v in sorted(med.items()):
        print(json.dumps({"bench": "optim_vs_torch", "config": {
            "model": cfg["model"], "params": cfg["params"], "optimizer": opt,
            "threads": cfg["threads"], "rounds": len(ms[(opt, m)])}, "method": m,
            "ms": round(v, 4), "baseline": "torch (faster of default, foreach)",
            "ratio_to_baseline": round(v / torch_best, 3)}))
PY
