"""bench/peers/lowbits_targets.py: issue 33's targets against the JSON lines
of bench/autocast and bench/lowbits (read from the files named, or stdin):
bf16 autocast >= 2x faster than f32 where the GEMMs dominate (on a CPU with
AMX), int8 linear / conv layers >= 2x faster than f32, and the digits
examples' accuracies (PTQ within 1 point of f32, QAT within 0.5, bf16 and
2:4 fine-tuned within 1), judged on their mean over the data orders
bench/lowbits measured. Prints the CPU's low-precision features, then a
line per target: the measured value, the goal, met or not. Reads only what
the benches printed; runs nothing. Plain Python, no dependency."""
import json
import sys

feats = set()
try:
    for l in open("/proc/cpuinfo"):
        if l.startswith("flags"):
            feats = set(l.split(":", 1)[1].split())
            break
except OSError:
    pass
want = ["avx2", "f16c", "avx512f", "avx512_bf16", "avx512_vnni", "avx512_fp16", "amx_bf16", "amx_int8"]
print("cpu features: " + ", ".join(f + ("" if f in feats else " (no)") for f in want))
amx = "amx_bf16" in feats

rows = []
for src in (sys.argv[1:] or ["-"]):
    for l in (sys.stdin if src == "-" else open(src)):
        l = l.strip()
        if l.startswith("{"):
            try:
                rows.append(json.loads(l))
            except ValueError:
                pass


def find(bench, method, **cfg):
    for r in rows:
        c = r.get("config", {})
        if r.get("bench") == bench and r.get("method") == method and all(
                str(c.get(k)) == str(v) for k, v in cfg.items()):
            return r
    return None


def speed(label, r, goal=0.5, applies=True):
    if not r:
        print(f"  {label:58s} not measured")
        return
    v = r["ratio_to_baseline"]
    verdict = ("met" if v <= goal else "not met") if applies else "n/a on this CPU"
    print(f"  {label:58s} {v:6.3f}x f32's time (speed-up {1 / v:4.2f}; goal <= {goal}): {verdict}")


def find_all(bench, method, **cfg):
    return [r for r in rows
            if r.get("bench") == bench and r.get("method") == method and all(
                str(r.get("config", {}).get(k)) == str(v) for k, v in cfg.items())]


def acc(label, rs, floor=None):
    """The mean of the points over the data orders measured (the goal is
    judged on it: one order's test set is 297 images, a point 3 of them),
    with their spread and the first order's (the peer's) value."""
    if not rs:
        print(f"  {label:58s} not measured")
        return
    v = [r["points_vs_baseline"] for r in rs]
    m = sum(v) / len(v)
    spread = f"mean of {len(v)} data orders, {min(v):+.2f} to {max(v):+.2f}; order {rs[0]['config'].get('shuffle', 7)}: {v[0]:+.2f}"
    goal = "" if floor is None else f" (goal >= {floor}): {'met' if m >= floor else 'not met'}"
    print(f"  {label:58s} {m:+6.2f} points{goal}")
    print(f"  {'':58s} ({spread})")


print("bf16 autocast, GEMM-dominated steps (the goal assumes AMX):")
speed("training step mlp 784-1024-1024-10, B=256",
      find("autocast", "bf16_autocast", program="training_step"), applies=amx)
speed("training step mlp 256-512-512-10, B=256",
      find("lowbits", "bf16_autocast", model="mlp 256-512-512-10", step="fwd+bwd"), applies=amx)
print("bf16 autocast, the flagship programs (measured, no goal):")
for r in rows:
    if r.get("bench") == "autocast" and r.get("method", "").endswith("_autocast"):
        c = r["config"]
        print(f"  {c.get('program', '') + ' ' + c.get('model', ''):58s} {r['ratio_to_baseline']:6.3f}x f32's time")
print("int8 layers (goal: 2x faster than f32):")
for bits in (8, 7):
    speed(f"static, mlp 256-512-512-10 fwd, {bits}-bit activations",
          find("lowbits", "int8_static", model="mlp 256-512-512-10", activation_bits=bits))
    speed(f"static, digits cnn fwd, {bits}-bit activations",
          find("lowbits", "int8_static", model="digits cnn conv3x3(1->8)-288-10", activation_bits=bits))
    speed(f"static, conv3x3 32->64 on 16x16 fwd, {bits}-bit activations",
          find("lowbits", "int8_static", layer="conv3x3 32->64 on 16x16, padding 1", activation_bits=bits))
speed("dynamic, mlp 256-512-512-10 fwd", find("lowbits", "int8_dynamic", model="mlp 256-512-512-10"))
speed("dynamic, linear 256-512-512", find("lowbits", "int8_dynamic", layer="linear 256-512-512"))
print("accuracy (digits, points against f32):")
for model in ("digits mlp 64-128-128-10", "digits cnn conv3x3(1->8)-288-10"):
    for method, what, floor in (("int8_ptq", "PTQ", -1.0), ("int8_qat", "QAT", -0.5)):
        acc(f"{model}: {what}", find_all("lowbits", method, model=model), floor)
        t = find("quant_torch", method + "_mean", model=model)
        if t:  # the peer on the same orders of the data (bench/peers/quant_torch.py)
            print(f"  {'  (torch ' + t['config']['torch'] + ' FX, the same data orders)':58s} "
                  f"{t['points_vs_f32']:+6.2f} points ({t['min']:+.2f} to {t['max']:+.2f})")
    # the same fine-tuning in f32: what QAT's epochs cost without quantization
    ctl = find_all("lowbits", "f32_finetuned_as_qat", model=model)
    acc("  (control: f32 fine-tuned as QAT was)", ctl)
    by = {r["config"].get("shuffle"): r["points_vs_baseline"] for r in ctl}
    d = [r["points_vs_baseline"] - by[r["config"].get("shuffle")]
         for r in find_all("lowbits", "int8_qat", model=model) if r["config"].get("shuffle") in by]
    if d:  # QAT's points beyond the control's, order by order: quantization's own cost
        print(f"  {'  (QAT beyond its control, order by order)':58s} {sum(d) / len(d):+6.2f} points")
    acc(f"{model}: bf16 autocast", find_all("lowbits", "bf16_autocast", model=model), -1.0)
acc("digits mlp: 2:4 pruned and fine-tuned",
    find_all("lowbits", "sparse24_finetuned", model="digits mlp 64-128-128-10"), -1.0)
