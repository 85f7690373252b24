"""Pricing and quantile study: exact continuous sampling against its law and a grid.

Run from the repository root::

    python -m benchmarks pricing                      # writes ./jaxdp-results/pricing/
    python -m benchmarks pricing --out DIR --draws 1000000
    python -m benchmarks pricing --update-committed   # refreshes benchmarks/results/pricing/

1. **Price density.** Bids ``[1, 1, 1, 3.01]`` on ``[0, 3.5]`` (the classic
   example: a price of 3.02 earns nothing, 3.01 earns 3.01, 1 earns 4). For
   ε in {0.01, 1, 5}: the exact density ∝ exp(ε·rev(p) / (2·3.5)), computed in
   NumPy float64, against a histogram of ``--draws`` draws of
   :func:`jaxdp.private_price`. ``price_density.{png,json}``.
2. **Revenue loss.** OPT − E[rev(p)] against ε, for the exact mechanism (no
   grid) and for :func:`jaxdp.exponential` on a 3,500-point grid
   ``linspace(0, 3.5, 3500)``: the exact expectation of each (float64, closed
   form per interval / a sum over the grid) and a Monte Carlo mean of
   ``--draws`` draws per ε, all ε in one vmapped call. For the classic bids and
   for 1,000 random bids. ``revenue_loss.{png,json}``.
3. **Quantiles.** The exact density of :func:`jaxdp.private_quantile` against a
   histogram of its draws: the median of 1,000 Gaussian points for three ε, and
   the 30% quantile of 10**6 integer-valued points (mostly zero-length
   intervals). ``quantile_density.{png,json}``.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import jaxdp

from . import _paths
from ._suite import price_bounds

CLASSIC_BIDS = np.array([1.0, 1.0, 1.0, 3.01])
PRICE_RANGE = (0.0, 3.5)
DENSITY_EPS = (0.01, 1.0, 5.0)
GRID_POINTS = 3500


# ----------------------------------------------------------------------------- exact laws


def _intervals(bids, lo, hi):
    """Edges and counts #{bids >= p} of the revenue's linear pieces."""
    b = np.sort(np.asarray(bids, np.float64))
    edges = np.concatenate([[lo], b, [hi]])
    count = len(b) - np.arange(len(b) + 1)
    return edges, count.astype(np.float64)


def revenue(prices, bids):
    b = np.sort(np.asarray(bids, np.float64))
    p = np.asarray(prices, np.float64)
    return p * (len(b) - np.searchsorted(b, p, side="left"))


def price_density(x, bids, epsilon, lo, hi):
    """Exact density of the private price at ``x`` (float64, log-space normaliser)."""
    k = epsilon / (2 * hi)
    edges, count = _intervals(bids, lo, hi)
    log_mass, _ = _interval_stats(edges, count, k)
    log_z = np.logaddexp.reduce(log_mass)
    return np.exp(k * revenue(x, bids) - log_z)


def _interval_stats(edges, count, k):
    """Per interval: log of ∫ exp(k c p) dp and the conditional mean price."""
    a, b = edges[:-1], edges[1:]
    w = b - a
    y = k * count * w  # log-density rise across the interval
    with np.errstate(divide="ignore", invalid="ignore"):
        shape = np.where(y > 1e-3, np.log(-np.expm1(-y)) - np.log(y), -y / 2 + y**2 / 24)
        log_mass = np.where(w > 0, k * count * b + np.log(w) + shape, -np.inf)
        # density ∝ exp(y t / w) on t in [0, w]: E[t] = w (1/(1 - e^-y) - 1/y)
        frac = np.where(y > 1e-3, -1 / np.expm1(-y) - 1 / y, 0.5 + y / 12)
    return log_mass, a + np.where(w > 0, w * frac, 0.0)


def exact_expected_revenue(bids, epsilon, lo, hi):
    edges, count = _intervals(bids, lo, hi)
    log_mass, mean_p = _interval_stats(edges, count, epsilon / (2 * hi))
    prob = np.exp(log_mass - np.logaddexp.reduce(log_mass))
    return float(np.sum(prob * count * mean_p))


def grid_expected_revenue(bids, epsilon, grid, hi):
    rev = revenue(grid, bids)
    logits = epsilon / (2 * hi) * rev
    prob = np.exp(logits - np.logaddexp.reduce(logits))
    return float(np.sum(prob * rev))


def optimal_revenue(bids):
    return float(np.max(revenue(np.asarray(bids), bids)))


def quantile_density(x, data, q, epsilon, lo, hi):
    d = np.sort(np.clip(np.asarray(data, np.float64), lo, hi))
    n = len(d)
    edges = np.concatenate([[lo], d, [hi]])
    w = np.diff(edges)
    logw = epsilon / (2 * max(q, 1 - q)) * -np.abs(np.arange(n + 1) - q * n)
    with np.errstate(divide="ignore"):
        log_z = np.logaddexp.reduce(np.where(w > 0, logw + np.log(w), -np.inf))
    j = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, n)
    return np.exp(logw[j] - log_z)


# ----------------------------------------------------------------------------- studies


def _meta(args) -> dict:
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        commit = ""
    dev = jax.devices()[0]
    return {
        "command": "python -m benchmarks.pricing " + " ".join(args),
        "jax_version": jax.__version__,
        "backend": jax.default_backend(),
        "device": getattr(dev, "device_kind", str(dev)),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "commit": commit,
    }


def study_density(key, draws: int) -> dict:
    lo, hi = PRICE_RANGE
    eps = jnp.asarray(DENSITY_EPS, jnp.float32)
    t0 = time.perf_counter()
    prices = jaxdp.private_price(
        key,
        jnp.asarray(CLASSIC_BIDS),
        epsilon=eps,
        **price_bounds(*PRICE_RANGE),
        shape=(draws, len(DENSITY_EPS)),
    ).block_until_ready()
    seconds = time.perf_counter() - t0
    prices = np.asarray(prices, np.float64)
    bins = np.linspace(lo, hi, 141)
    x = np.linspace(lo, hi, 3501)
    out = {
        "bids": CLASSIC_BIDS.tolist(),
        "price_range": list(PRICE_RANGE),
        "draws": draws,
        "seconds_for_all_draws": seconds,
        "bin_edges": bins.tolist(),
        "panels": [],
    }
    for col, e in enumerate(DENSITY_EPS):
        hist, _ = np.histogram(prices[:, col], bins=bins, density=True)
        cdf_gap = _ks_statistic(prices[:, col], CLASSIC_BIDS, e, lo, hi)
        out["panels"].append(
            {
                "epsilon": e,
                "histogram_density": hist.tolist(),
                "x": x.tolist(),
                "exact_density": price_density(x, CLASSIC_BIDS, e, lo, hi).tolist(),
                "p_price_above_3.01_exact": float(
                    np.trapezoid(
                        price_density(np.linspace(3.01, hi, 2001), CLASSIC_BIDS, e, lo, hi),
                        np.linspace(3.01, hi, 2001),
                    )
                ),
                "p_price_above_3.01_draws": float(np.mean(prices[:, col] > 3.01)),
                "ks_statistic_vs_exact": cdf_gap,
            }
        )
    return out


def _ks_statistic(samples, bids, epsilon, lo, hi) -> float:
    import scipy.stats

    edges, count = _intervals(bids, lo, hi)
    k = epsilon / (2 * hi)
    log_mass, _ = _interval_stats(edges, count, k)
    log_z = np.logaddexp.reduce(log_mass)
    before = np.concatenate([[0.0], np.cumsum(np.exp(log_mass - log_z))])

    def cdf(x):
        j = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, len(count) - 1)
        a, c = edges[j], count[j]
        slope = k * c
        with np.errstate(divide="ignore", invalid="ignore"):
            part = np.where(
                slope > 0,
                np.exp(k * c * a - log_z) * np.expm1(slope * (x - a)) / slope,
                np.exp(k * c * a - log_z) * (x - a),
            )
        return before[j] + part

    return float(scipy.stats.kstest(samples, cdf).statistic)


def study_revenue_loss(key, draws: int, num_eps: int) -> dict:
    lo, hi = PRICE_RANGE
    eps = np.logspace(-2, 4, num_eps)
    grid = np.linspace(lo, hi, GRID_POINTS)
    rng = np.random.default_rng(0)
    scenarios = {
        "classic [1, 1, 1, 3.01]": CLASSIC_BIDS,
        "1000 bids ~ U[0, 3.5]": rng.uniform(lo, hi, 1000),
    }
    out = {
        "epsilon": eps.tolist(),
        "grid": f"linspace({lo}, {hi}, {GRID_POINTS})",
        "draws_per_epsilon": draws,
        "scenarios": [],
    }
    for i, (name, bids) in enumerate(scenarios.items()):
        opt = optimal_revenue(bids)
        exact = np.array([exact_expected_revenue(bids, e, lo, hi) for e in eps])
        gridded = np.array([grid_expected_revenue(bids, e, grid, hi) for e in eps])
        k_exact, k_grid = jax.random.split(jax.random.fold_in(key, i))
        eps_j = jnp.asarray(eps, jnp.float32)
        t0 = time.perf_counter()
        p_exact = jaxdp.private_price(
            k_exact,
            jnp.asarray(bids),
            epsilon=eps_j,
            **price_bounds(*PRICE_RANGE),
            shape=(draws, num_eps),
        ).block_until_ready()
        t_exact = time.perf_counter() - t0
        scores = jnp.asarray(revenue(grid, bids), jnp.float32)
        t0 = time.perf_counter()
        idx = jaxdp.exponential(
            k_grid,
            jnp.broadcast_to(scores, (num_eps, GRID_POINTS)),
            epsilon=eps_j,
            sensitivity=hi,
            shape=(draws, num_eps),
        ).block_until_ready()
        t_grid = time.perf_counter() - t0
        mc_exact = revenue(np.asarray(p_exact, np.float64), bids).mean(axis=0)
        mc_grid = revenue(grid[np.asarray(idx)], bids).mean(axis=0)
        out["scenarios"].append(
            {
                "name": name,
                "num_bids": len(bids),
                "opt_revenue": opt,
                "grid_opt_revenue": float(revenue(grid, bids).max()),
                "loss_exact_expected": (opt - exact).tolist(),
                "loss_grid_expected": (opt - gridded).tolist(),
                "loss_exact_monte_carlo": (opt - mc_exact).tolist(),
                "loss_grid_monte_carlo": (opt - mc_grid).tolist(),
                "seconds_exact_draws": t_exact,
                "seconds_grid_draws": t_grid,
            }
        )
    return out


def study_quantiles(key, draws: int, big_n: int) -> dict:
    rng = np.random.default_rng(1)
    gauss = rng.normal(size=1000)
    ints = rng.integers(0, 100, size=big_n).astype(np.float64)
    cases = [
        ("median of 1,000 N(0, 1) points", gauss, 0.5, (0.02, 0.1, 0.5), (-5.0, 5.0)),
        (
            f"30% quantile of {big_n:,} integer points in [0, 100)",
            ints,
            0.3,
            (5e-5, 2e-4, 1e-3),
            (0.0, 100.0),
        ),
    ]
    out = {"draws": draws, "cases": []}
    for i, (name, data, q, epsilons, bounds) in enumerate(cases):
        t0 = time.perf_counter()
        r = jaxdp.private_quantile(
            jax.random.fold_in(key, i),
            jnp.asarray(data, jnp.float32),
            q,
            epsilon=jnp.asarray(epsilons, jnp.float32),
            bounds=bounds,
            shape=(draws, len(epsilons)),
        ).block_until_ready()
        seconds = time.perf_counter() - t0
        r = np.asarray(r, np.float64)
        true_q = float(np.quantile(data, q))
        width = 0.4 if i == 0 else 12.0  # half-width of the plotted window
        x = np.linspace(true_q - width, true_q + width, 2001)
        bins = np.linspace(true_q - width, true_q + width, 121)
        panels = []
        for col, e in enumerate(epsilons):
            hist, _ = np.histogram(r[:, col], bins=bins)
            panels.append(
                {
                    "epsilon": e,
                    "histogram_density": (hist / (len(r) * np.diff(bins))).tolist(),
                    "x": x.tolist(),
                    "exact_density": quantile_density(x, data, q, e, *bounds).tolist(),
                    "nan_draws": int(np.isnan(r[:, col]).sum()),
                    "mean_abs_error": float(np.mean(np.abs(r[:, col] - true_q))),
                }
            )
        out["cases"].append(
            {
                "name": name,
                "n": len(data),
                "q": q,
                "bounds": list(bounds),
                "true_quantile": true_q,
                "bin_edges": bins.tolist(),
                "seconds": seconds,
                "panels": panels,
            }
        )
    return out


# ----------------------------------------------------------------------------- plots


def plot_density(res: dict, path: Path) -> None:
    import matplotlib.pyplot as plt

    panels = res["panels"]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4), sharex=True)
    bins = np.asarray(res["bin_edges"])
    for ax, p in zip(axes, panels, strict=True):
        ax.stairs(
            p["histogram_density"],
            bins,
            fill=True,
            alpha=0.35,
            label=f"histogram, {res['draws']:,} draws",
        )
        ax.plot(p["x"], p["exact_density"], "k", lw=1.2, label="exact density")
        ax.axvline(3.01, color="tab:red", ls=":", lw=1)
        ax.set_title(f"ε = {p['epsilon']:g}")
        ax.set_xlabel("price p")
    axes[0].set_ylabel("density")
    axes[0].legend(loc="upper left", fontsize=8)
    fig.suptitle("private_price, bids [1, 1, 1, 3.01] on [0, 3.5]: exact law vs draws")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_loss(res: dict, path: Path) -> None:
    import matplotlib.pyplot as plt

    eps = np.asarray(res["epsilon"])
    scen = res["scenarios"]
    fig, axes = plt.subplots(1, len(scen), figsize=(5.6 * len(scen), 3.8))
    for ax, s in zip(axes, scen, strict=True):
        rel = 1 / s["opt_revenue"]
        ax.loglog(eps, np.asarray(s["loss_exact_expected"]) * rel, "C0-", label="exact (no grid)")
        ax.loglog(
            eps,
            np.asarray(s["loss_grid_expected"]) * rel,
            "C1--",
            label=f"{GRID_POINTS:,}-point grid",
        )
        ax.loglog(
            eps,
            np.clip(s["loss_exact_monte_carlo"], 1e-12, None) * rel,
            "C0o",
            ms=3,
            label="exact, Monte Carlo",
        )
        ax.loglog(
            eps,
            np.clip(s["loss_grid_monte_carlo"], 1e-12, None) * rel,
            "C1x",
            ms=4,
            label="grid, Monte Carlo",
        )
        floor = (s["opt_revenue"] - s["grid_opt_revenue"]) * rel
        if floor > 0:
            ax.axhline(floor, color="C1", lw=0.8, ls=":", label="grid resolution (OPT − OPT_grid)")
        ax.set_title(f"{s['name']}: OPT = {s['opt_revenue']:.4g}")
        ax.set_xlabel("ε")
        ax.set_ylabel("mean revenue loss / OPT")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_quantiles(res: dict, path: Path) -> None:
    import matplotlib.pyplot as plt

    cases = res["cases"]
    fig, axes = plt.subplots(1, len(cases), figsize=(5.6 * len(cases), 3.8))
    for ax, c in zip(axes, cases, strict=True):
        bins = np.asarray(c["bin_edges"])
        for i, p in enumerate(c["panels"]):
            ax.stairs(p["histogram_density"], bins, color=f"C{i}", alpha=0.6)
            ax.plot(
                p["x"],
                p["exact_density"],
                color=f"C{i}",
                lw=1,
                label=f"ε = {p['epsilon']:g} (exact line, histogram)",
            )
        ax.axvline(c["true_quantile"], color="k", ls=":", lw=1, label="true quantile")
        ax.set_title(c["name"], fontsize=10)
        ax.set_xlabel("released value")
        ax.set_ylabel("density")
        ax.legend(fontsize=7)
    fig.suptitle(f"private_quantile: exact law vs {res['draws']:,} draws")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ----------------------------------------------------------------------------- main


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``python -m benchmarks pricing``."""
    _paths.add_output_arguments(parser, "pricing")
    parser.add_argument("--draws", type=int, default=10**6, help="draws per histogram / ε")
    parser.add_argument("--num-eps", type=int, default=25, help="ε values on the loss curve")
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes (seconds): checks that the study runs"
    )


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks pricing",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    return run(parser.parse_args(argv), argv)


def run(args: argparse.Namespace, argv: list[str] | None = None) -> dict:
    """Runs the three studies and writes their JSON and PNG files; returns the results."""
    raw = list(sys.argv[1:] if argv is None else argv)
    args.out = _paths.output_dir(args.out, args.update_committed, "pricing")
    draws, num_eps, big_n = args.draws, args.num_eps, 10**6
    if args.quick:
        draws, num_eps, big_n = 2000, 4, 10**4
    args.out.mkdir(parents=True, exist_ok=True)
    key = jax.random.key(0)
    meta = _meta(raw)
    results = {
        "price_density": study_density(jax.random.fold_in(key, 0), draws),
        "revenue_loss": study_revenue_loss(jax.random.fold_in(key, 1), draws, num_eps),
        "quantile_density": study_quantiles(jax.random.fold_in(key, 2), draws, big_n),
    }
    plots = {
        "price_density": plot_density,
        "revenue_loss": plot_loss,
        "quantile_density": plot_quantiles,
    }
    for name, res in results.items():
        res["meta"] = meta
        (args.out / f"{name}.json").write_text(json.dumps(res, indent=1))
        plots[name](res, args.out / f"{name}.png")
        print(f"wrote {args.out / name}.json and .png")
    return results


if __name__ == "__main__":
    main()
