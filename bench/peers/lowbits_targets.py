"""bench/peers/lowbits_targets.py: issue 33's targets against the JSON lines
of bench/autocast and bench/lowbits (read from the files named, or stdin):
bf16 autocast >= 2x faster than f32 where the GEMMs dominate (on a CPU with
AMX), int8 linear / conv layers >= 2x faster than f32, and the digits
examples' accuracies (PTQ within 1 point of f32, QAT within 0.5, bf16 and
2:4 fine-tuned within 1). Prints the CPU's low-precision features, then a
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


def acc(label, r, floor):
    if not r:
        print(f"  {label:58s} not measured")
        return
    v = r["points_vs_baseline"]
    print(f"  {label:58s} {v:+6.2f} points (goal >= {floor}): {'met' if v >= floor else 'not met'}")


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
    acc(f"{model}: PTQ", find("lowbits", "int8_ptq", model=model), -1.0)
    acc(f"{model}: QAT", find("lowbits", "int8_qat", model=model), -0.5)
    ctl = find("lowbits", "f32_finetuned_as_qat", model=model)
    if ctl:  # the same fine-tuning in f32: what QAT's epochs cost without quantization
        print(f"  {'  (control: f32 fine-tuned as QAT was)':58s} {ctl['points_vs_baseline']:+6.2f} points")
    acc(f"{model}: bf16 autocast", find("lowbits", "bf16_autocast", model=model), -1.0)
acc("digits mlp: 2:4 pruned and fine-tuned",
    find("lowbits", "sparse24_finetuned", model="digits mlp 64-128-128-10"), -1.0)
