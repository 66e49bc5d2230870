"""bench/peers/jax_gpu.py: JAX's jit on the workloads of cft's device
benches (bench/per_sample_grads, ensemble, maml, dp_sgd with --device), the
peer a GPU user compares cft with (issue 32's table):

  per_sample_grads  vmap(grad) of the mean cross-entropy of MLPs
                    64-128-128-10 (B = 64, 256, 1024), 256-512-512-10
                    (B = 1024), 784-1024-1024-10 (B = 256), and the plain
                    batched gradient at B = 1024;
  ensemble          K = 32 MLPs 64-128-10, B = 256, value_and_grad under
                    vmap, one minibatch shared ("same") or one per model;
  maml              second-order MAML on the sinusoid MLP 1-40-40-1, T = 100
                    tasks, K = 10, 5 or 1 inner SGD steps, plus Adam;
  dp_sgd            the DP-SGD clipped gradient sum (per-example gradients,
                    each clipped to norm 1 over all parameters, summed) and
                    the batched gradient, MLP 64-128-128-10 and the CNN of
                    bench/cnn.h (conv 3x3 1->8, relu, linear 288->10),
                    B = 256 and 1024.

Each function is jitted, called 5 times to warm up, then timed call by
call with block_until_ready (median and min of --calls calls, in ms). Prints
one JSON line per workload with the config and method names cft's lines use
(method jax_jit_<what cft calls it>), and the precision of f32 matrix
products: --matmul-precision highest (the default here, as cft's default:
f32 products in f32), high (TF32; JAX's own default on an Ampere or later
GPU) or medium (bf16), set through jax_default_matmul_precision.
bench/gpu.sh runs it beside cft and joins the lines. A peer, never a
dependency of cft."""
import argparse
import json
import time

import jax
import jax.numpy as jnp

ap = argparse.ArgumentParser()
ap.add_argument("--calls", type=int, default=50)
ap.add_argument("--matmul-precision", default="highest", choices=["highest", "high", "medium"])
ap.add_argument("--only", default="", help="comma-separated benches (default: all)")
a = ap.parse_args()
jax.config.update("jax_default_matmul_precision",
                  {"highest": "float32", "high": "tensorfloat32", "medium": "bfloat16"}[
                      a.matmul_precision])
DEV = jax.devices()[0]


def timed(bench, config, method, f, *args):
    """median / min ms of f(*args) over a.calls calls, as one JSON line"""
    args = jax.device_put(args, DEV)
    for _ in range(5):
        jax.block_until_ready(f(*args))
    ts = []
    for _ in range(a.calls):
        t0 = time.perf_counter()
        jax.block_until_ready(f(*args))
        ts.append((time.perf_counter() - t0) * 1e3)
    ts.sort()
    print(json.dumps({"bench": bench, "config": config, "method": method,
                      "device": str(DEV), "matmul_precision": a.matmul_precision,
                      "median_ms": round(ts[len(ts) // 2], 4), "min_ms": round(ts[0], 4),
                      "jax": jax.__version__}), flush=True)


def uniform(key, shape, bound):
    return jax.random.uniform(key, shape, jnp.float32, -bound, bound)


def mlp_init(key, widths):
    """torch's default init, as examples/mlp.h: U(-1/sqrt(fan_in), ...)"""
    ks = jax.random.split(key, 2 * (len(widths) - 1))
    p = []
    for l in range(len(widths) - 1):
        b = 1.0 / widths[l] ** 0.5
        p += [uniform(ks[2 * l], (widths[l], widths[l + 1]), b),
              uniform(ks[2 * l + 1], (widths[l + 1],), b)]
    return p


def mlp(p, x):
    for l in range(0, len(p) - 2, 2):
        x = jax.nn.relu(x @ p[l] + p[l + 1])
    return x @ p[-2] + p[-1]


def cross_entropy(logits, y):
    """mean softmax cross-entropy; one example when y is a scalar"""
    lse = jax.nn.logsumexp(logits, axis=-1)
    picked = jnp.take_along_axis(logits, y[..., None], axis=-1)[..., 0]
    return jnp.mean(lse - picked)


def mlp_loss(p, x, y):
    return cross_entropy(mlp(p, x), y)


def cnn_init(key):
    ks = jax.random.split(key, 4)
    b1, b2 = 1.0 / 3.0, 1.0 / 288 ** 0.5
    return [uniform(ks[0], (8, 1, 3, 3), b1), uniform(ks[1], (8,), b1),
            uniform(ks[2], (288, 10), b2), uniform(ks[3], (10,), b2)]


def cnn_loss(p, x, y):
    """x [1, 8, 8] (one example) or [B, 1, 8, 8]"""
    single = x.ndim == 3
    xb = x[None] if single else x
    h = jax.lax.conv_general_dilated(xb, p[0], (1, 1), "VALID",
                                     dimension_numbers=("NCHW", "OIHW", "NCHW"))
    h = jax.nn.relu(h + p[1][None, :, None, None]).reshape(xb.shape[0], 288)
    logits = h @ p[2] + p[3]
    return cross_entropy(logits[0] if single else logits, y)


def data(key, B, shape, classes):
    kx, ky = jax.random.split(key)
    return (jax.random.normal(kx, (B,) + shape, jnp.float32),
            jax.random.randint(ky, (B,), 0, classes, jnp.int32))


def per_sample_grads():
    for widths, B in [((64, 128, 128, 10), 64), ((64, 128, 128, 10), 256),
                      ((64, 128, 128, 10), 1024), ((256, 512, 512, 10), 1024),
                      ((784, 1024, 1024, 10), 256)]:
        p = mlp_init(jax.random.PRNGKey(3), widths)
        x, y = data(jax.random.PRNGKey(11), B, (widths[0],), widths[-1])
        cfg = {"model": "mlp " + "-".join(map(str, widths)), "B": B}
        psg = jax.jit(jax.vmap(jax.grad(mlp_loss), in_axes=(None, 0, 0)))
        timed("per_sample_grads", cfg, "jax_jit_vmap_grad", psg, p, x, y)
        if B == 1024:
            timed("per_sample_grads", cfg, "jax_jit_batched_grad", jax.jit(jax.grad(mlp_loss)),
                  p, x, y)


def ensemble():
    K, B = 32, 256
    ps = [mlp_init(k, (64, 128, 10)) for k in jax.random.split(jax.random.PRNGKey(1), K)]
    stacked = [jnp.stack([p[i] for p in ps]) for i in range(4)]
    xk, yk = data(jax.random.PRNGKey(2), K * B, (64,), 10)
    xk, yk = xk.reshape(K, B, 64), yk.reshape(K, B)
    vg = jax.value_and_grad(mlp_loss)
    for diff in (False, True):
        cfg = {"K": K, "B": B, "data": "diff" if diff else "same", "pass": "fwd_bwd"}
        f = jax.jit(jax.vmap(vg, in_axes=(0, 0, 0) if diff else (0, None, None)))
        timed("ensemble", cfg, "jax_jit_vmap", f, stacked,
              xk if diff else xk[0], yk if diff else yk[0])


def maml():
    T, K, INNER_LR, LR, B1, B2, EPS = 100, 10, 0.01, 1e-3, 0.9, 0.999, 1e-8

    def mse(p, x, y):
        return jnp.mean((mlp(p, x) - y) ** 2)

    def task_loss(p, xs, ys, xq, yq, n):
        for _ in range(n):
            g = jax.grad(mse)(p, xs, ys)
            p = [w - INNER_LR * gw for w, gw in zip(p, g)]
        return mse(p, xq, yq)

    def step(p, m, v, c1, c2, xs, ys, xq, yq, n):
        def meta(p):
            return jnp.mean(jax.vmap(task_loss, in_axes=(None, 0, 0, 0, 0, None))(
                p, xs, ys, xq, yq, n))
        loss, g = jax.value_and_grad(meta)(p)
        m = [B1 * mi + (1 - B1) * gi for mi, gi in zip(m, g)]
        v = [B2 * vi + (1 - B2) * gi * gi for vi, gi in zip(v, g)]
        p = [w - LR * (mi * c1) / (jnp.sqrt(vi * c2) + EPS) for w, mi, vi in zip(p, m, v)]
        return p, m, v, loss

    p = mlp_init(jax.random.PRNGKey(1), (1, 40, 40, 1))
    z = [jnp.zeros_like(w) for w in p]
    ks = jax.random.split(jax.random.PRNGKey(7), 4)
    xs, ys, xq, yq = (jax.random.uniform(k, (T, K, 1), jnp.float32, -5, 5) for k in ks)
    c1, c2 = jnp.float32(1 / (1 - B1)), jnp.float32(1 / (1 - B2))
    for n in (5, 1):
        cfg = {"T": T, "n_inner": n, "K": K}
        f = jax.jit(step, static_argnums=9)
        timed("maml", cfg, "jax_jit_vmap", lambda *args: f(*args, n), p, z, z, c1, c2, xs, ys,
              xq, yq)


def dp_sgd():
    def clipped_sum(loss):
        def f(p, x, y):
            g = jax.vmap(jax.grad(loss), in_axes=(None, 0, 0))(p, x, y)
            sq = sum(jnp.sum(gi.reshape(gi.shape[0], -1) ** 2, axis=1) for gi in g)
            scale = jnp.minimum(1.0, 1.0 / (jnp.sqrt(sq) + 1e-6))
            return [jnp.tensordot(scale, gi, axes=1) for gi in g]
        return f

    for B in (256, 1024):
        for name, loss, p, shape in [
                ("mlp 64-128-128-10", mlp_loss, mlp_init(jax.random.PRNGKey(1), (64, 128, 128, 10)),
                 (64,)),
                ("cnn conv3x3x8-relu-linear", cnn_loss, cnn_init(jax.random.PRNGKey(7)),
                 (1, 8, 8))]:
            x, y = data(jax.random.PRNGKey(5), B, shape, 10)
            cfg = {"model": name, "B": B}
            timed("dp_sgd", cfg, "jax_jit_dp_clipped_grad_sum", jax.jit(clipped_sum(loss)), p, x,
                  y)
            timed("dp_sgd", cfg, "jax_jit_batched_grad", jax.jit(jax.grad(loss)), p, x, y)


BENCHES = {"per_sample_grads": per_sample_grads, "ensemble": ensemble, "maml": maml,
           "dp_sgd": dp_sgd}
for name in (a.only.split(",") if a.only else BENCHES):
    BENCHES[name]()
