"""bench/peers/gpu_table.py CFT.jsonl JAX.jsonl: cft's device lines (bench/*
--device) beside the JAX peer's (bench/peers/jax_gpu.py), joined on bench,
config, matrix precision and method (cft_jit_vmap_grad ~ jax_jit_vmap_grad,
cft_dp_clipped_grad_sum ~ jax_jit_dp_clipped_grad_sum), as a Markdown table
with cft / JAX (medians; <= 1.0 is cft as fast or faster) and what one warm
cft call asked of the device. Lines of either side without a partner are
listed after it. Standard library only."""
import json
import sys


def rows(path):
    out = []
    try:
        for line in open(path):
            line = line.strip()
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    except OSError:
        pass
    return out


def what(method):
    for p in ("cft_", "jax_"):
        if method.startswith(p):
            method = method[len(p):]
    return method[4:] if method.startswith("jit_") else method


def key(r):
    return (r["bench"], json.dumps(r.get("config", {}), sort_keys=True),
            r.get("matmul_precision", "highest"), what(r["method"]))


cft = [r for r in rows(sys.argv[1]) if "device" in r and r.get("median_ms", -1) > 0]
jax = {key(r): r for r in rows(sys.argv[2]) if r.get("median_ms", -1) > 0}
print("| bench | config | precision | method | cft ms | JAX ms | cft / JAX | cft per call |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
worst, used = 0.0, set()
for r in cft:
    k = key(r)
    j = jax.get(k)
    used.add(k)
    pc = r.get("per_call", {})
    counts = "kernels %g, graphs %g, ops %g, syncs %g, allocs %g, h2d %g, d2h %g" % tuple(
        pc.get(f, 0) for f in ("kernels", "graphs", "ops", "syncs", "allocs", "h2d", "d2h"))
    ratio = r["median_ms"] / j["median_ms"] if j else None
    if ratio:
        worst = max(worst, ratio)
    cfg = ", ".join("%s %s" % (a, b) for a, b in r.get("config", {}).items())
    print("| %s | %s | %s | %s | %.4f | %s | %s | %s |" % (
        r["bench"], cfg, k[2], k[3], r["median_ms"], "%.4f" % j["median_ms"] if j else "-",
        "%.2f" % ratio if ratio else "-", counts))
for k, j in jax.items():
    if k not in used:
        print("| %s | %s | %s | %s | - | %.4f | - | (no cft line) |" % (k[0], k[1], k[2], k[3],
                                                                     j["median_ms"]))
if worst:
    print("\nworst cft / JAX: %.2f" % worst)
