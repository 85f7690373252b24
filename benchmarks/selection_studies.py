"""Studies of the joint mechanisms and private candidate selection.

``python -m benchmarks study NAME`` (dispatched here) or
``python -m benchmarks.selection_studies NAME [--scale S] [--out DIR]``:

* ``joint-quantiles``: joint exponential quantiles vs m independent
  ``private_quantile`` calls at ε/m vs an ε-split tree of medians, error
  against m on Gaussian and uniform data (Gillenwater, Joseph & Kulesza 2021).
* ``joint-top-k``: ``joint_top_k`` vs peeling (``top_k``) on Zipf counts
  (Gillenwater, Joseph, Muñoz Medina & Ribero 2022).
* ``private-selection``: success rate of ``select_private_candidate`` against
  the number of candidates.
* ``throughput-selection``: draws/s of each new sampler against its peer
  (a NumPy JointExp written from the paper, since dp_multiq is not on PyPI; a
  NumPy joint top-k; OpenDP's ``make_select_private_candidate`` if installed).

JSON and PNG go to ``jaxdp-results/studies`` under the working directory, or
``--out DIR``. Defaults run in under two minutes each on two CPU cores.
"""

# ruff: noqa: B023  (the timed lambdas run inside their loop iteration)
from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import jaxdp

NAMES = ("joint-quantiles", "joint-top-k", "private-selection", "throughput-selection")


def _meta() -> dict[str, Any]:
    return {
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "devices": [d.device_kind for d in jax.devices()],
    }


def _save(out: Path, name: str, result: dict, plot) -> None:
    out.mkdir(parents=True, exist_ok=True)
    result = {"study": name, "machine": _meta(), **result}
    (out / f"{name}.json").write_text(json.dumps(result, indent=1))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig = plot(plt, result)
        fig.savefig(out / f"{name}.png", dpi=110, bbox_inches="tight")
        plt.close(fig)
    except ImportError:  # pragma: no cover - plots are optional
        pass


# ----------------------------------------------------------------------------- NumPy references


def smith_quantile_np(rng, data, q, eps, lo, hi, sensitivity=1.0):
    """One draw of Smith's quantile mechanism in NumPy float64."""
    x = np.sort(np.clip(data, lo, hi))
    n = len(x)
    edges = np.concatenate([[lo], x, [hi]])
    w = np.diff(edges)
    with np.errstate(divide="ignore"):
        logm = -eps * np.abs(np.arange(n + 1) - q * n) / (2 * sensitivity) + np.log(w)
    p = np.exp(logm - logm.max())
    i = rng.choice(n + 1, p=p / p.sum())
    return rng.uniform(edges[i], edges[i + 1])


def tree_quantiles_np(rng, data, qs, eps, lo, hi):
    """ε-split binary tree: the middle quantile of each node's range on its data,
    then recurse left and right; ε / depth per level (disjoint data: parallel
    composition within a level)."""
    qs = list(qs)
    depth = max(1, math.ceil(math.log2(len(qs) + 1)))
    out = {}

    def node(idx, d, a, b, qa, qb):
        if not idx:
            return
        mid = idx[len(idx) // 2]
        q_rel = (qs[mid] - qa) / (qb - qa) if qb > qa else 0.5
        # Smith's mechanism with its tight add/remove sensitivity, as jaxdp.private_quantile
        sens = max(q_rel, 1.0 - q_rel)
        if len(d):
            o = smith_quantile_np(rng, d, q_rel, eps / depth, a, b, sens)
        else:
            o = rng.uniform(a, b)
        out[mid] = o
        node(idx[: len(idx) // 2], d[d < o], a, o, qa, qs[mid])
        node(idx[len(idx) // 2 + 1 :], d[d >= o], o, b, qs[mid], qb)

    node(list(range(len(qs))), np.asarray(data), lo, hi, 0.0, 1.0)
    return np.array([out[j] for j in range(len(qs))])


def _logdotexp_toeplitz_lt(c, x):
    """log(T exp(x)) for the lower-triangular Toeplitz T with first column exp(c),
    by FFT after max-shifting (as in the paper's speed-up)."""
    mc, mx = np.max(c), np.max(x)
    n = len(x)
    size = 1 << math.ceil(math.log2(2 * n - 1)) if n > 1 else 2
    y = np.fft.irfft(np.fft.rfft(np.exp(c - mc), size) * np.fft.rfft(np.exp(x - mx), size))[:n]
    with np.errstate(divide="ignore"):
        return np.log(np.maximum(y, 0)) + mc + mx


def joint_exp_np(rng, data, qs, eps, lo, hi):
    """JointExp (Gillenwater et al. 2021, Alg. 1 with the FFT speed-up), NumPy float64,
    add/remove sensitivity 2 (1 - min gap); written from the paper."""
    x = np.sort(np.clip(data, lo, hi))
    n = len(x)
    edges = np.concatenate([[lo], x, [hi]])
    with np.errstate(divide="ignore"):
        log_len = np.log(np.diff(edges))
    qs = np.asarray(qs, np.float64)
    m = len(qs)
    g = np.diff(np.concatenate([[0.0], qs, [1.0]]))
    delta = 2 * (1 - g.min())
    gaps = np.arange(n + 1)[:, None]
    log_phi = -eps / (2 * delta) * np.abs(gaps - g[None, :] * n)  # (N, m+1)
    n_int = n + 1
    alpha = np.full((m, n_int, m), -np.inf)
    alpha[0, :, 0] = log_phi[:, 0] + log_len
    no_zero = np.zeros(n_int)
    no_zero[0] = -np.inf
    for j in range(1, m):
        hat = np.logaddexp.reduce(alpha[j - 1], axis=1)
        alpha[j, :, 0] = log_len + _logdotexp_toeplitz_lt(log_phi[:, j] + no_zero, hat)
        alpha[j, 0, 0] = -np.inf
        alpha[j, :, 1 : j + 1] = (
            (log_phi[0, j] + log_len)[:, None] + alpha[j - 1, :, :j] - np.log(np.arange(2, j + 2))
        )
    out = np.zeros(m)
    last, j, first = n_int - 1, m - 1, True
    while j >= 0:
        logd = alpha[j, : last + 1, :] + log_phi[: last + 1, j + 1][::-1, None]
        if not first:
            logd[last, :] = -np.inf
        flat = logd.ravel()
        p = np.exp(flat - flat.max())
        i, r = np.unravel_index(rng.choice(len(flat), p=p / p.sum()), logd.shape)
        out[j - r : j + 1] = rng.uniform(edges[i], edges[i + 1], size=r + 1)
        j -= r + 1
        last, first = i, False
    return np.sort(out)


def joint_top_k_np(rng, counts, k, eps, monotonic=True):
    """The 2022 paper's grouped sampler in NumPy float64 (one draw)."""
    c = np.asarray(counts, np.float64)
    order = np.argsort(-c, kind="stable")
    cs = c[order]
    n = len(c)
    err = cs[:k, None] - cs[None, :]
    pos = np.arange(k)
    logcount = np.zeros((k, n))
    for p in range(k):
        below = np.searchsorted(err[p], err, side="left")
        upto = np.searchsorted(err[p], err, side="right")
        cnt = np.where(p < pos[:, None], below, upto) - p
        with np.errstate(divide="ignore"):
            term = np.where(cnt > 0, np.log(np.maximum(cnt, 1)), -np.inf)
        logcount += np.where(p == pos[:, None], 0.0, term)
    delta_u = 1.0 if monotonic else 2.0
    logits = logcount - eps * err / (2 * delta_u)
    p = np.exp(logits - logits.max()).ravel()
    gi, gj = np.unravel_index(rng.choice(k * n, p=p / p.sum()), (k, n))
    e = err[gi, gj]
    used = np.zeros(n, bool)
    used[gj] = True
    seq = []
    for p_ in range(k):
        if p_ == gi:
            seq.append(gj)
            continue
        ok = (err[p_] < e if p_ < gi else err[p_] <= e) & ~used
        pick = rng.choice(np.nonzero(ok)[0])
        used[pick] = True
        seq.append(pick)
    return order[np.array(seq)]


# ----------------------------------------------------------------------------- studies


def _rank_error(data, est, qs):
    """Mean over quantiles of |#{x < o_j} - q_j n| (misclassified points)."""
    x = np.sort(data)
    below = np.searchsorted(x, est, side="left")
    return float(np.mean(np.abs(below - np.asarray(qs) * len(x))))


def study_joint_quantiles(scale: float, out: Path) -> dict:
    n, lo, hi, eps = 1000, -100.0, 100.0, 1.0
    trials = max(2, int(10 * scale))
    ms = [1, 3, 5, 10, 20]
    rng = np.random.default_rng(0)
    key = jax.random.key(0)
    result: dict[str, Any] = {"n": n, "epsilon": eps, "bounds": [lo, hi], "trials": trials}
    for dist in ("gaussian", "uniform"):
        curves = {"joint": [], "independent": [], "tree": []}
        for m in ms:
            qs = np.linspace(0, 1, m + 2)[1:-1]
            errs = {name: [] for name in curves}
            for t in range(trials):
                data = rng.normal(0, 5, n) if dist == "gaussian" else rng.uniform(-5, 5, n)
                k = jax.random.fold_in(key, t)
                joint = jaxdp.private_quantiles(
                    k, data, jnp.asarray(qs), epsilon=eps, bounds=(lo, hi)
                )
                indep = jaxdp.private_quantile(
                    k, data, jnp.asarray(qs), epsilon=eps / m, bounds=(lo, hi)
                )
                errs["joint"].append(_rank_error(data, np.asarray(joint), qs))
                errs["independent"].append(_rank_error(data, np.sort(np.asarray(indep)), qs))
                errs["tree"].append(
                    _rank_error(data, tree_quantiles_np(rng, data, qs, eps, lo, hi), qs)
                )
            for name in curves:
                curves[name].append(float(np.mean(errs[name])))
        result[dist] = {"m": ms, **curves}

    def plot(plt, r):
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        for ax, dist in zip(axes, ("gaussian", "uniform"), strict=True):
            for name in ("joint", "independent", "tree"):
                ax.plot(r[dist]["m"], r[dist][name], marker="o", label=name)
            ax.set(
                title=f"{dist}, n={n}, ε={eps}",
                xlabel="m quantiles",
                ylabel="mean misclassified points",
                yscale="log",
            )
            ax.legend()
        return fig

    _save(out, "joint-quantiles", result, plot)
    return result


def study_joint_top_k(scale: float, out: Path) -> dict:
    d, eps = 1000, 1.0
    trials = max(2, int(50 * scale))
    ks = [5, 10, 20, 40]
    ranks = np.arange(1, d + 1)
    counts = np.floor(20000 * ranks**-1.1).astype(np.float32)  # Zipf-like
    key = jax.random.key(0)
    res: dict[str, Any] = {
        "d": d,
        "epsilon": eps,
        "trials": trials,
        "k": ks,
        "joint": [],
        "peeling": [],
        "joint_recall": [],
        "peeling_recall": [],
    }
    top = np.sort(counts)[::-1]
    for k in ks:
        kw = dict(epsilon=eps, sensitivity=1.0, monotonic=True, shape=(trials,))
        for name, fn in (("joint", jaxdp.joint_top_k), ("peeling", jaxdp.top_k)):
            s = np.asarray(fn(key, counts, k, **kw))
            linf = np.max(top[:k][None, :] - counts[s], axis=-1)
            res[name].append(float(np.mean(linf)))
            true = set(np.argsort(-counts, kind="stable")[:k])
            res[name + "_recall"].append(float(np.mean([len(true & set(r)) / k for r in s])))

    def plot(plt, r):
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        for name in ("joint", "peeling"):
            axes[0].plot(r["k"], r[name], marker="o", label=name)
            axes[1].plot(r["k"], r[name + "_recall"], marker="o", label=name)
        axes[0].set(
            xlabel="k",
            ylabel="mean ℓ∞ error (counts)",
            yscale="log",
            title=f"Zipf counts, d={d}, ε={eps}",
        )
        axes[1].set(xlabel="k", ylabel="fraction of true top-k", title="recall")
        axes[0].legend()
        return fig

    _save(out, "joint-top-k", res, plot)
    return res


def study_private_selection(scale: float, out: Path) -> dict:
    eps0, n = 0.5, 200
    trials = max(50, int(1000 * scale))
    sizes = [2, 5, 10, 20, 50, 100]
    res: dict[str, Any] = {
        "epsilon0": eps0,
        "n": n,
        "trials": trials,
        "candidates": sizes,
        "best_of_T": [],
        "noisy_max_all": [],
        "mean_T": [],
    }
    rng = np.random.default_rng(0)
    for c in sizes:
        quality = np.sort(rng.uniform(0.5, 0.8, c))
        quality[-1] = 0.9  # one clearly best configuration
        acc = jnp.asarray(quality * n)
        gamma = 1.0 / c

        def candidate(k, acc=acc, c=c):
            k1, k2 = jax.random.split(k)
            j = jax.random.randint(k1, (), 0, c)
            # accuracy count of config j (sensitivity 1) + Lap(1/eps0): eps0-DP
            return acc[j] + jax.random.laplace(k2) / eps0, j

        def one(k, candidate=candidate, gamma=gamma):
            return jaxdp.select_private_candidate(
                k, candidate, epsilon=eps0, stop_probability=gamma, max_repetitions=40 * c
            )[1]

        keys = jax.random.split(jax.random.key(c), trials)
        picked = np.asarray(jax.jit(jax.vmap(one))(keys))
        res["best_of_T"].append(float(np.mean(picked == c - 1)))
        rnm = jaxdp.report_noisy_max(
            jax.random.key(1),
            acc,
            epsilon=3 * eps0,
            sensitivity=1.0,
            monotonic=False,
            shape=(trials,),
        )
        res["noisy_max_all"].append(float(np.mean(np.asarray(rnm) == c - 1)))
        res["mean_T"].append(c)

    def plot(plt, r):
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot(r["candidates"], r["best_of_T"], marker="o", label="select_private_candidate (3ε₀)")
        ax.plot(
            r["candidates"],
            r["noisy_max_all"],
            marker="s",
            label="report-noisy-max over all, 3ε₀ (needs all scores)",
        )
        ax.set(
            xscale="log",
            xlabel="number of candidates C (γ = 1/C)",
            ylabel="P[best candidate released]",
            title=f"ε₀={eps0}, n={n}",
        )
        ax.legend()
        return fig

    _save(out, "private-selection", res, plot)
    return res


def _rate(fn, reps: int) -> float:
    fn()  # warm up (compile)
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return reps / (time.perf_counter() - t0)


def study_throughput_selection(scale: float, out: Path) -> dict:
    rng = np.random.default_rng(0)
    rows = []
    reps = max(2, int(5 * scale))
    for n, m in ((1000, 5), (10000, 10)):
        data = rng.normal(0, 5, n)
        qs = np.linspace(0, 1, m + 2)[1:-1]
        f = jax.jit(
            lambda k, x, qs=qs: jaxdp.private_quantiles(
                k, x, jnp.asarray(qs), epsilon=1.0, bounds=(-100.0, 100.0)
            )
        )
        xd = jnp.asarray(data, jnp.float32)
        jx = _rate(lambda: f(jax.random.key(0), xd).block_until_ready(), reps)
        npy = _rate(lambda: joint_exp_np(rng, data, qs, 1.0, -100.0, 100.0), reps)
        rows.append(
            {
                "sampler": "private_quantiles",
                "peer": "numpy JointExp (paper, FFT)",
                "config": f"n{n}_m{m}",
                "jaxdp_per_s": jx,
                "peer_per_s": npy,
                "ratio": jx / npy,
            }
        )
    for d, k in ((1000, 10), (10000, 10)):
        counts = np.floor(20000 * np.arange(1, d + 1) ** -1.1).astype(np.float32)
        f = jax.jit(
            lambda key, c, k=k: jaxdp.joint_top_k(
                key, c, k, epsilon=1.0, sensitivity=1.0, monotonic=True
            )
        )
        cj = jnp.asarray(counts)
        jx = _rate(lambda: f(jax.random.key(0), cj).block_until_ready(), reps)
        npy = _rate(lambda: joint_top_k_np(rng, counts, k, 1.0), reps)
        rows.append(
            {
                "sampler": "joint_top_k",
                "peer": "numpy grouped sampler (paper)",
                "config": f"d{d}_k{k}",
                "jaxdp_per_s": jx,
                "peer_per_s": npy,
                "ratio": jx / npy,
            }
        )

    def cand(k):
        return jax.random.laplace(k), jnp.int32(0)

    g = jax.jit(
        lambda k: jaxdp.select_private_candidate(
            k, cand, epsilon=1.0, stop_probability=0.1, max_repetitions=400
        )[0]
    )
    jx = _rate(lambda: g(jax.random.key(0)).block_until_ready(), reps * 20)
    row = {"sampler": "select_private_candidate", "config": "gamma0.1_laplace", "jaxdp_per_s": jx}
    try:
        import opendp.prelude as dp

        dp.enable_features("contrib", "honest-but-curious")
        space = dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float)
        m_cand = space >> dp.m.then_user_measurement(
            dp.max_divergence(),
            lambda x: (float(rng.laplace(loc=x)), 0),
            lambda d_in: d_in,
            TO="(f64, ExtrinsicObject)",
        )
        sel = dp.c.make_select_private_candidate(m_cand, stop_probability=0.1, threshold=1e9)
        row.update(
            peer="opendp make_select_private_candidate (threshold never met: "
            "runs ~1/γ candidates, like best-of-T)",
            peer_per_s=_rate(lambda: sel(0.0), reps * 20),
        )
        row["ratio"] = jx / row["peer_per_s"]
    except Exception as err:  # noqa: BLE001 - the peer is optional
        row.update(peer=f"opendp unavailable: {type(err).__name__}: {err}")
    rows.append(row)
    res = {
        "rows": rows,
        "note": "one draw per call, warm (compiled); float32 jaxdp vs float64 NumPy",
    }

    def plot(plt, r):
        fig, ax = plt.subplots(figsize=(7, 3.5))
        labels = [f"{x['sampler']}\n{x['config']}" for x in r["rows"] if "ratio" in x]
        ratios = [x["ratio"] for x in r["rows"] if "ratio" in x]
        ax.barh(labels, ratios)
        ax.axvline(1.0, color="k", lw=0.8)
        ax.set(xscale="log", xlabel="jaxdp draws/s ÷ peer draws/s (one draw per call)")
        return fig

    _save(out, "throughput-selection", res, plot)
    return res


STUDIES = {
    "joint-quantiles": study_joint_quantiles,
    "joint-top-k": study_joint_top_k,
    "private-selection": study_private_selection,
    "throughput-selection": study_throughput_selection,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks study",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("name", choices=(*NAMES, "all"))
    parser.add_argument("--scale", type=float, default=1.0, help="multiply trial counts")
    parser.add_argument("--out", type=Path, default=Path.cwd() / "jaxdp-results" / "studies")
    args = parser.parse_args(argv)
    if not args.scale > 0:
        parser.error(f"--scale must be > 0, got {args.scale}")
    for name in NAMES if args.name == "all" else (args.name,):
        t0 = time.perf_counter()
        result = STUDIES[name](args.scale, args.out)
        print(json.dumps({"study": name, "seconds": round(time.perf_counter() - t0, 1)}))
        if name == "throughput-selection":
            for row in result["rows"]:
                print(json.dumps(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
