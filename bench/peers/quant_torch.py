"""bench/peers/quant_torch.py: torch 1.13's FX graph-mode quantization on
the digits MLP 64-128-128-10 and CNN (conv 3x3 1->8, relu, linear 288->10;
its forward timed at batch 256), the peer of bench/lowbits.c's int8 lines and
examples/quantize_digits.c: the same data split (the digits CSV, shuffled
by the same xorshift, 1500 training rows), the same training (SGD lr 0.1,
batch 32, 10 epochs; torch's own initialisation), PTQ calibrated on ten
training batches, two epochs of QAT at lr 0.02; test accuracies over the
same orders of the data as bench/lowbits (--shuffles, 10) with their
means last, and the forward time of the int8 model against f32 on the
first order's test rows (best of rounds, alternated). Prints JSON lines.
A peer, never a dependency."""
import argparse, copy, json, os, time

import torch
import torch.nn as nn
from torch.ao.quantization import get_default_qconfig_mapping, get_default_qat_qconfig_mapping
from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx, prepare_qat_fx

ap = argparse.ArgumentParser()
ap.add_argument("--threads", type=int, default=os.cpu_count())
ap.add_argument("--epochs", type=int, default=10)
ap.add_argument("--rounds", type=int, default=20)
ap.add_argument("--shuffles", type=int, default=10)
a = ap.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(3)
engine = "fbgemm" if "fbgemm" in torch.backends.quantized.supported_engines else "onednn"
torch.backends.quantized.engine = engine

here = os.path.dirname(os.path.abspath(__file__))
path = os.path.join(os.environ.get("CFT_DATA_DIR", os.path.join(here, "..", "..", "data")), "digits.csv")
rows = [list(map(int, l.split(","))) for l in open(path) if l.strip()]
NT = 1500
ORDERS = [7, 1, 2, 3, 4, 5, 6, 8, 9, 10][:max(1, min(10, a.shuffles))]  # bench/lowbits.c's


def split(seed):  # examples/mlp.h's digits_load and digits_shuffle
    x = [[v / 16.0 for v in r[:64]] for r in rows]
    y = [r[64] for r in rows]
    s = (seed * 2654435761 + 1) & (2**64 - 1)
    for i in range(len(x) - 1, 0, -1):
        s ^= (s << 13) & (2**64 - 1); s ^= s >> 7; s ^= (s << 17) & (2**64 - 1)
        j = s % (i + 1)
        x[i], x[j] = x[j], x[i]; y[i], y[j] = y[j], y[i]
    X, Y = torch.tensor(x), torch.tensor(y)
    return X, X[:NT], Y[:NT], X[NT:], Y[NT:]


def mlp():
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))

def cnn():  # bench/cnn.h's
    return nn.Sequential(nn.Unflatten(1, (1, 8, 8)), nn.Conv2d(1, 8, 3), nn.ReLU(), nn.Flatten(),
                         nn.Linear(288, 10))

def train(m, epochs, lr):
    opt = torch.optim.SGD(m.parameters(), lr=lr)
    for _ in range(epochs):
        for b in range(0, NT - 31, 32):
            opt.zero_grad()
            nn.functional.cross_entropy(m(Xtr[b:b + 32]), Ytr[b:b + 32]).backward()
            opt.step()

def acc(m):
    with torch.no_grad():
        return (m(Xte).argmax(-1) == Yte).float().mean().item()

points = {}
for order in ORDERS:
    X, Xtr, Ytr, Xte, Yte = split(order)
    torch.manual_seed(3)  # the same initialisation for every order, as cft's
    for name, make in (("digits mlp 64-128-128-10", mlp), ("digits cnn conv3x3(1->8)-288-10", cnn)):
        def line(method, **kw):
            print(json.dumps({"bench": "quant_torch", "config": {"model": name, "train": NT,
                  "shuffle": order, "engine": engine, "torch": torch.__version__, "threads": a.threads},
                  "method": method, **kw}), flush=True)

        f32 = make()
        train(f32, a.epochs, 0.1)
        f32.eval()
        a32 = acc(f32)
        line("f32", test_accuracy=round(a32, 4))
        ex = (Xtr[:32],)
        p = prepare_fx(copy.deepcopy(f32).eval(), get_default_qconfig_mapping(engine), ex)
        with torch.no_grad():
            for b in range(10):
                p(Xtr[b * 32:(b + 1) * 32])
        ptq = convert_fx(p)
        line("int8_ptq", test_accuracy=round(acc(ptq), 4), points_vs_f32=round(100 * (acc(ptq) - a32), 2))
        points.setdefault((name, "int8_ptq"), []).append(100 * (acc(ptq) - a32))
        q = prepare_qat_fx(copy.deepcopy(f32).train(), get_default_qat_qconfig_mapping(engine), ex)
        train(q, 2, 0.02)
        qat = convert_fx(q.eval())
        line("int8_qat", test_accuracy=round(acc(qat), 4), points_vs_f32=round(100 * (acc(qat) - a32), 2))
        points.setdefault((name, "int8_qat"), []).append(100 * (acc(qat) - a32))
        if order != ORDERS[0]:
            continue  # the int8 forward is timed on the first order's models
        xb = Xte if name.startswith("digits mlp") else X[:256]
        tf = tq = float("inf")
        with torch.no_grad():
            for _ in range(a.rounds):
                t0 = time.perf_counter()
                for _ in range(20):
                    f32(xb)
                t1 = time.perf_counter()
                for _ in range(20):
                    ptq(xb)
                t2 = time.perf_counter()
                tf, tq = min(tf, t1 - t0), min(tq, t2 - t1)
        line("int8_forward", rows=len(xb), ms=round(tq / 20 * 1e3, 4), baseline="f32_forward",
             baseline_ms=round(tf / 20 * 1e3, 4), ratio_to_baseline=round(tq / tf, 3))
for (name, method), v in points.items():  # over the orders, as lowbits_targets.py reads cft's
    print(json.dumps({"bench": "quant_torch", "config": {"model": name, "train": NT, "shuffles": len(v),
          "engine": engine, "torch": torch.__version__}, "method": method + "_mean",
          "points_vs_f32": round(sum(v) / len(v), 2), "min": round(min(v), 2), "max": round(max(v), 2)}),
          flush=True)
