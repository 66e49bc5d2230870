#!/usr/bin/env python3
"""bench/peers/optim_torch.py: the peer of bench/optim_step.c: torch's
optimizer step (Adam, SGD with momentum) over the parameters of the same MLP
(default 784-512-512-10, f32), with its default per-parameter loop
(foreach=False on the CPU in torch 1.13) and with foreach=True. Gradients
are set once; each step updates the parameters in place, as a training loop
does. A peer, never a dependency: run by bench/optim_vs_torch.sh when
Debian's python3-torch is installed.

    python3 bench/peers/optim_torch.py [--threads N] [--sizes 784,512,512,10] [--rounds R]

One JSON line per optimizer and variant, median ms per step over rounds of
10 steps."""
import argparse
import json
import statistics
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--sizes", default="784,512,512,10")
ap.add_argument("--rounds", type=int, default=30)
a = ap.parse_args()
torch.set_num_threads(a.threads)
sizes = [int(s) for s in a.sizes.split(",")]
torch.manual_seed(0)


def model():
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i + 2 < len(sizes):
            layers.append(torch.nn.ReLU())
    m = torch.nn.Sequential(*layers)
    for p in m.parameters():
        p.grad = torch.randn_like(p) * 1e-3
    return m


nparam = sum(p.numel() for p in model().parameters())
for name, make in [("adam", lambda ps, fe: torch.optim.Adam(ps, lr=1e-3, foreach=fe)),
                   ("sgd_momentum",
                    lambda ps, fe: torch.optim.SGD(ps, lr=1e-2, momentum=0.9, foreach=fe))]:
    runs = []
    for fe in (False, True):
        m = model()
        opt = make(list(m.parameters()), fe)
        for _ in range(5):
            opt.step()
        runs.append((fe, opt, []))
    for _ in range(a.rounds):  # the variants alternate
        for fe, opt, ts in runs:
            t0 = time.perf_counter()
            for _ in range(10):
                opt.step()
            ts.append((time.perf_counter() - t0) / 10 * 1e3)
    for fe, opt, ts in runs:
        print(json.dumps({"bench": "optim_step_torch",
                          "config": {"model": "mlp " + "-".join(map(str, sizes)),
                                     "params": nparam, "optimizer": name,
                                     "threads": a.threads, "rounds": a.rounds,
                                     "torch": torch.__version__},
                          "method": "torch_foreach" if fe else "torch_default",
                          "ms": round(statistics.median(ts), 4),
                          "min_ms": round(min(ts), 4)}), flush=True)
