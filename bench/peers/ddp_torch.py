#!/usr/bin/env python3
"""bench/peers/ddp_torch.py: the peer of bench/dist/ddp_train.c: one
data-parallel training step with torch's DistributedDataParallel over gloo
(2 processes on this machine): zero_grad, forward, mean cross-entropy,
backward (gradients all-reduced in buckets), Adam step, for the same MLP
(default 784-512-512-10) on random data; and the Adam step alone. A peer,
never a dependency: run by bench/ddp_vs_torch.sh when Debian's python3-torch
is installed.

    python3 bench/peers/ddp_torch.py [--ranks 2] [--threads 1] [--batch 64] [--rounds 30]

JSON lines from rank 0: median ms per step over rounds of 5 steps."""
import argparse
import json
import os
import socket
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, a, port):
    torch.set_num_threads(a.threads)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=a.ranks)
    sizes = [int(s) for s in a.sizes.split(",")]
    torch.manual_seed(0)
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i + 2 < len(sizes):
            layers.append(torch.nn.ReLU())
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(*layers))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(10 + rank)
    x = torch.rand(a.batch, sizes[0], generator=g)
    y = torch.randint(0, sizes[-1], (a.batch,), generator=g)
    lossf = torch.nn.CrossEntropyLoss()

    def train():
        opt.zero_grad(set_to_none=True)
        lossf(model(x), y).backward()
        opt.step()

    def optim_only():
        opt.step()

    out = {}
    for what, f in (("training step", train), ("optimizer step", optim_only)):
        for _ in range(5):
            f()
        ts = []
        for _ in range(a.rounds):
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(5):
                f()
            ts.append((time.perf_counter() - t0) / 5 * 1e3)
        out[what] = ts
    if rank == 0:
        for what, ts in out.items():
            print(json.dumps({"bench": "ddp_train_torch", "config": {
                "model": "mlp " + "-".join(map(str, sizes)), "batch_per_rank": a.batch,
                "ranks": a.ranks, "threads": a.threads, "optimizer": "adam", "what": what,
                "torch": torch.__version__, "backend": "gloo"},
                "method": "torch_ddp", "ms": round(statistics.median(ts), 4),
                "min_ms": round(min(ts), 4)}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--sizes", default="784,512,512,10")
    a = ap.parse_args()
    with socket.socket() as s:  # a free port on the loopback
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(a, port), nprocs=a.ranks)
