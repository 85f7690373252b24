"""Targets, the markdown table, the JSON file and the plots of a suite run."""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

#: Version of the results JSON layout (documented in benchmarks/README.md).
SCHEMA_VERSION = 1

#: Benchmark name prefixes (the part before ``_n<size>``) in words, for tables and legends.
LABELS = {
    "exponential_auto": "jaxdp.exponential (auto)",
    "exponential_gumbel": "jaxdp.exponential (Gumbel)",
    "report_noisy_max_laplace": "jaxdp.report_noisy_max (Laplace)",
    "report_noisy_max_gumbel": "jaxdp.report_noisy_max (Gumbel)",
    "permute_and_flip": "jaxdp.permute_and_flip",
    "top_k": "jaxdp.top_k",
    "private_price_exact": "jaxdp.private_price (exact)",
    "private_price_grid": "jaxdp.exponential on a price grid",
    "hand_jax_inverse_cdf": "JAX by hand: inverse CDF",
    "hand_jax_inverse_cdf_rows": "JAX by hand: inverse CDF per row",
    "jax_categorical": "jax.random.categorical",
    "numpy_choice": "NumPy Generator.choice",
    "numpy_inverse_cdf_rows": "NumPy inverse CDF per row",
    "numpy_laplace_argmax": "NumPy Laplace noise + argmax",
    "numpy_gumbel_argmax": "NumPy Gumbel noise + argmax",
    "textbook_loop": "Python loop of np.random.choice",
    "diffprivlib_exponential": "diffprivlib Exponential",
    "diffprivlib_permute_and_flip": "diffprivlib PermuteAndFlip",
    "opendp_noisy_max": "OpenDP make_noisy_max",
}


def label(entry: dict) -> str:
    """A benchmark's implementation in words: ``jaxdp.exponential (method='auto')``."""
    name = entry["name"]
    prefix = re.split(r"_n\d", name, maxsplit=1)[0]
    words = LABELS.get(prefix) or LABELS.get(re.sub(r"_(k|g)\d.*$", "", prefix))
    if words is None:
        return entry.get("impl", name)
    k = re.search(r"top_k_k(\d+)", name)
    if k:
        words += f" (k={k.group(1)})"
    impl = re.search(r"_f(?:32|64)_(\w+)$", name)
    if impl:
        words += f", {impl.group(1)} keys"
    return words


# ----------------------------------------------------------------------------- formatting


def _si(x: float | None) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    if x == 0:
        return "0"
    e = int(math.floor(math.log10(abs(x))))
    return f"{x / 10**e:.2f}e{e}"


def _ms(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x * 1e3:.3g}" if x < 100 else f"{x * 1e3:.0f}"


def _mib(x: int | None) -> str:
    return "-" if x is None else f"{x / 2**20:.3g}"


def progress(entry: dict, wall: float, done: int = 0, total: int = 0) -> None:
    """One plain log line per finished benchmark (when there is no progress bar)."""
    count = f"[{done}/{total}] " if total else ""
    if "skipped" in entry:
        line = f"{count}{entry['name']}: skipped: {entry['skipped']}"
    else:
        line = (
            f"{count}{entry['name']}: {_si(entry['draws_per_s'])} draws/s, "
            f"median {_ms(entry['median_s'])} ms ({wall:.1f} s)"
        )
        if entry.get("ratio") is not None:
            line += f", {entry['pair_target']['target']} {entry['ratio']:.3g}"
    print(line, file=sys.stderr, flush=True)


def target_verdict(t: dict) -> str:
    """``met (2.71 vs >= 1.5)``, ``missed (1.8 vs <= 1.3)``, ``reported (1.2)`` or
    ``not measured``. ``op`` (default ``>=``) says which way the target points."""
    if t["value"] is None:
        return "not measured"
    if t.get("required") is None:
        return f"reported ({t['value']:.3g}, no target)"
    op = t.get("op", ">=")
    return f"{'met' if t['met'] else 'missed'} ({t['value']:.3g} vs {op} {t['required']:g})"


def pair_target(e: dict) -> dict:
    """The target of a call-shape row (``e["pair_target"]``) with its measured ratio."""
    t = e["pair_target"]
    value, required, op = e.get("ratio"), t["required"], t["op"] or ">="
    met = None
    if value is not None and required is not None:
        met = bool(value >= required) if op == ">=" else bool(value <= required)
    return {**t, "op": op, "value": value, "met": met}


def _required(t: dict) -> str:
    return "-" if t.get("required") is None else f"{t.get('op', '>=')} {t['required']:g}"


def _short(x: float) -> str:
    """1000 -> '1e3', 200000 -> '2e5'."""
    e = int(math.floor(math.log10(x))) if x > 0 else 0
    return f"{x / 10**e:g}e{e}"


def _shape(e: dict) -> str:
    if e["workload"] == "W4":
        return f"grid={_short(e['n'])}, S={_short(e['draws_per_row'])}"
    if e["rows"] > 1:
        return f"n={_short(e['n'])}, B={_short(e['rows'])}"
    return f"n={_short(e['n'])}, S={_short(e['draws_per_row'])}"


def _compact(x: float) -> str:
    """3 significant digits, SI exponent: 1.23e8."""
    if not math.isfinite(x) or x <= 0:
        return "-"
    e = int(math.floor(math.log10(x)))
    return f"{x / 10**e:.2f}e{e}"


def comparisons(payload: dict) -> list[dict]:
    """Per workload shape (and backend): the fastest jaxdp sampler and the fastest peer.

    Top-k (k outputs per draw) is left out of jaxdp's side; shapes without a peer are left
    out. ``ratio`` is jaxdp's draws/s over the peer's.
    """
    done = [e for e in payload["results"] if "skipped" not in e]
    groups: dict[tuple, list[dict]] = {}
    for e in done:
        key = (e["workload"], e["n"], e["draws_per_row"], e["rows"])
        groups.setdefault(key, []).append(e)
    out = []
    for key, es in groups.items():
        peers = [e for e in es if e["library"] != "jaxdp"]
        if not peers:
            continue
        peer = max(peers, key=lambda e: e["draws_per_s"])
        for backend in payload["backends"]:
            ours = [
                e
                for e in es
                if e["library"] == "jaxdp"
                and e["backend"] == backend
                and not e["name"].startswith("top_k")
            ]
            if not ours:
                continue
            best = max(ours, key=lambda e: e["draws_per_s"])
            out.append(
                {
                    "workload": key[0],
                    "shape": _shape(best),
                    "backend": backend,
                    "jaxdp": best["name"],
                    "jaxdp_draws_per_s": best["draws_per_s"],
                    "peer": peer["name"],
                    "peer_draws_per_s": peer["draws_per_s"],
                    "ratio": best["draws_per_s"] / peer["draws_per_s"],
                    "_labels": (label(best), label(peer)),
                }
            )
    return out


def summary(payload: dict, width: int = 100) -> str:
    """The terminal summary: jaxdp against the best peer per workload, then the targets."""
    multi = len(payload["backends"]) > 1
    rows = comparisons(payload)
    lines = [
        f"jaxdp against the fastest peer, {payload['mode']} run. draws/s: jaxdp's draws per "
        "second;",
        "ratio: jaxdp's rate over the peer's (above 1x, jaxdp is faster). Peers run on the host.",
        "",
    ]
    name_w = 33
    head = (
        f"{'W':<4} {'shape':<12} {'jaxdp (fastest)':<{name_w}} {'draws/s':>8}  "
        f"{'fastest peer':<{name_w}} {'ratio':>6}"
    )
    lines += [head, "-" * len(head)]
    for r in rows:
        ours, theirs = r["_labels"]
        wl = r["workload"] + (f" {r['backend']}" if multi else "")
        lines.append(
            f"{wl:<4} {r['shape']:<12} {_clip(ours, name_w):<{name_w}} "
            f"{_compact(r['jaxdp_draws_per_s']):>8}  {_clip(theirs, name_w):<{name_w}} "
            f"{_ratio_text(r['ratio']):>6}"
        )
    lines += ["", "Targets (measured ratio vs required):", ""]
    tw = max([len(t["target"]) for t in payload["targets"]] + [10])
    tw = min(tw, width - 30)
    for t in payload["targets"]:
        lines.append(f"  {_clip(t['target'], tw):<{tw}}  {target_verdict(t)}")
    skipped = [e for e in payload["results"] if "skipped" in e]
    if skipped:
        lines += ["", f"{len(skipped)} benchmark(s) skipped (reasons in the full table)."]
    if payload["notes"]:
        lines += ["", "Notes:"] + [f"  - {n}" for n in payload["notes"]]
    return "\n".join(lines)


def _ratio_text(r: float) -> str:
    return f"{r:.2g}x" if r < 10 else f"{r:.0f}x"


def _clip(s: str, w: int) -> str:
    return s if len(s) <= w else s[: w - 1] + "~"


# ----------------------------------------------------------------------------- targets


def _find(results: list[dict], prefix: str, backend: str | None = None) -> dict | None:
    for e in results:
        if e["name"].startswith(prefix) and "skipped" not in e:
            if backend is None or e["backend"] in (backend, "cpu (host)"):
                return e
    return None


def _ratio(a: dict | None, b: dict | None) -> float | None:
    if a is None or b is None:
        return None
    return a["draws_per_s"] / b["draws_per_s"]


def targets(payload: dict) -> list[dict]:
    """The issue's targets, each a ratio from this run (``met`` None if not measured)."""
    res = payload["results"]
    out: list[dict] = []

    def add(
        target: str, value: float | None, required: float | None, detail: str, op: str = ">="
    ) -> None:
        if value is None or required is None:
            met = None
        else:
            met = bool(value >= required) if op == ">=" else bool(value <= required)
        out.append(
            {
                "target": target,
                "value": value,
                "required": required,
                "op": op,
                "met": met,
                "detail": detail,
            }
        )

    for backend in payload["backends"]:
        suffix = f" [{backend}]" if len(payload["backends"]) > 1 else ""
        w1 = "n1e3_s1e6"
        em = _find(res, f"exponential_auto_{w1}", backend)
        hand = _find(res, f"hand_jax_inverse_cdf_{w1}", backend)
        add(
            f"W1 exponential / hand-written JAX inverse CDF{suffix}",
            _ratio(em, hand),
            1.5,
            "n=1e3, S=1e6",
        )
        add(
            f"W1 exponential / numpy Generator.choice{suffix}",
            _ratio(em, _find(res, f"numpy_choice_{w1}")),
            3.0,
            "n=1e3, S=1e6",
        )
        for lib in ("diffprivlib_exponential", "diffprivlib_permute_and_flip", "opendp_noisy_max"):
            other = _find(res, f"{lib}_{w1}")
            if other is not None:
                add(f"W1 exponential / {lib}{suffix}", _ratio(em, other), 1000.0, "n=1e3")
        w2 = "n1e3_b1e4"
        auto = _find(res, f"exponential_auto_{w2}", backend)
        add(
            f"W2 exponential(auto) / hand-written per-row inverse CDF{suffix}",
            _ratio(auto, _find(res, f"hand_jax_inverse_cdf_rows_{w2}", backend)),
            1.5,
            "B=1e4, n=1e3",
        )
        add(
            f"W2 exponential(auto): fraction of the exp-rate floor{suffix}",
            None if auto is None else auto.get("fraction_of_exp_floor"),
            0.5,
            "floor = B*n exps / measured exp rate",
        )
        for shape, label in (("n1e3_s1e4", "W1 shape"), (w2, "W2 shape")):
            ours = _find(res, f"report_noisy_max_laplace_{shape}", backend)
            theirs = _find(res, f"numpy_laplace_argmax_{shape}")
            add(
                f"W3 report_noisy_max(laplace) / numpy Laplace+argmax, {label}{suffix}",
                _ratio(ours, theirs),
                1.0,
                shape,
            )
            if ours is not None and ours.get("peak_bytes") is not None:
                full = 4.0 * ours["draws"] * ours["n"]
                add(
                    f"W3 {label}: S x n noise bytes / peak temporaries (no S x n temporaries)"
                    f"{suffix}",
                    full / max(ours["peak_bytes"], 1),
                    1.0,
                    f"peak {ours['peak_bytes'] / 2**20:.1f} MiB vs S x n float32 "
                    f"{full / 2**20:.0f} MiB",
                )
        if backend == "gpu":
            big = [
                e
                for e in res
                if e["backend"] == "gpu"
                and e["name"].startswith("exponential_auto_")
                and "skipped" not in e
            ]
            w2s = [e["candidates_per_s"] for e in big if e["workload"] == "W2"]
            w1s = [e["draws_per_s"] for e in big if e["workload"] == "W1" and e["draws"] >= 1e8]
            add("GPU W2 candidates/s", max(w2s) if w2s else None, 1e11, "best W2 shape")
            add("GPU W1 draws/s at S >= 1e8", max(w1s) if w1s else None, 1e10, "S >= 1e8")
        for e in res:  # the call shapes (C1-C6), each against its fast twin
            if "pair_target" in e and e["backend"] == backend and "skipped" not in e:
                t = pair_target(e)
                add(f"{e['workload']} {t['target']}{suffix}", t["value"], t["required"],
                    e["name"], op=t["op"])  # fmt: skip
    return out


# ----------------------------------------------------------------------------- markdown


def markdown(payload: dict) -> str:
    m = payload["machine"]
    lines = [
        f"## jaxdp benchmarks: {payload['mode']} run, {payload['created']}",
        "",
        f"Machine: {m['cpu_model']} ({m.get('cpu_family_model') or ''}), {m['cores']} cores, "
        f"{(m['memory_bytes'] or 0) / 2**30:.0f} GiB; GPU: {', '.join(m['gpus']) or 'none'}; "
        f"jax {m['jax']}, jaxlib {m['jaxlib']}, numpy {m['numpy']}; commit {m['commit']}.",
        f"Load average (1/5/15 min) at start {m.get('load_average_start')}, at end "
        f"{m.get('load_average_end')}: other processes shared these cores.",
        "",
        "Measured limits (best of repeats, same run):",
        "",
        "| backend | RNG (fused threefry) /s | RNG (stock jax.random) /s | exp /s | "
        "bandwidth GB/s |",
        "|---|---|---|---|---|",
    ]
    for b, r in payload["rates"].items():
        lines.append(
            f"| {b} | {_si(r['rng_per_s'])} | {_si(r['rng_stock_per_s'])} | "
            f"{_si(r['exp_per_s'])} | {r['bytes_per_s'] / 1e9:.1f} |"
        )
        if "named_peaks" in r:
            p = r["named_peaks"]
            lines.append(
                f"| {b} (named {p['name']}) | ~{_si(p['threefry_words_per_s'])} (int32 rate / "
                f"{115} ops) | | | {p['hbm_bytes_per_s'] / 1e9:.0f} (HBM) |"
            )
    multi = len(payload["backends"]) > 1
    lines += [
        "",
        "jaxdp against the fastest peer on each workload shape (ratio > 1: jaxdp is faster):",
        "",
        "| workload | shape | backend | jaxdp (fastest) | draws/s | fastest peer | draws/s "
        "| ratio |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in comparisons(payload):
        ours, theirs = r["_labels"]
        lines.append(
            f"| {r['workload']} | {r['shape']} | {r['backend']} | {ours} | "
            f"{_si(r['jaxdp_draws_per_s'])} | {theirs} | {_si(r['peer_draws_per_s'])} | "
            f"{r['ratio']:.3g} |"
        )
    lines += [
        "",
        "| benchmark | W | implementation | "
        + ("backend | " if multi else "")
        + "compile s | median ms | draws/s | candidates/s | peak MiB | floor | of floor |",
        "|---|---|---|" + ("---|" if multi else "") + "---|---|---|---|---|---|---|",
    ]
    for e in payload["results"]:
        head = f"| {e['name']} | {e['workload']} | {e['impl']} | "
        if multi:
            head += f"{e['backend']} | "
        if "skipped" in e:
            lines.append(head + f"skipped: {e['skipped']} | | | | | | |")
            continue
        extrap = "*" if e.get("extrapolated_from_draws") else ""
        floor = e.get("floor")
        comp = "-" if e.get("compile_s") is None else f"{e['compile_s']:.2f}"
        lines.append(
            head
            + f"{comp} | {_ms(e['median_s'])}{extrap} | {_si(e['draws_per_s'])} | "
            + f"{_si(e['candidates_per_s'])} | {_mib(e.get('peak_bytes'))} | "
            + (f"{_ms(floor['floor_s'])} ms ({floor['bound']}) | " if floor else "- | ")
            + (f"{100 * e['fraction_of_floor']:.1f}% |" if floor else "- |")
        )
    shapes = [e for e in payload["results"] if "pair_target" in e]
    if shapes:
        lines += [
            "",
            "Call shapes against their fast twins (timed alternately in one process; ratio: "
            "the median of the per-round ratios; compile rows time trace + lower + compile "
            "from empty caches):",
            "",
            "| shape | W | call shape | " + ("backend | " if multi else "") + "fast twin | "
            "shape ms | twin ms | ratio | target | verdict |",
            "|---|---|---|" + ("---|" if multi else "") + "---|---|---|---|---|---|",
        ]
        for e in shapes:
            t = e["pair_target"]
            lines.append(
                f"| {e['name']} | {e['workload']} | {e['impl']} | "
                + (f"{e['backend']} | " if multi else "")
                + f"{e['twin']['impl']} | {_ms(e['median_s'])} | {_ms(e['twin']['median_s'])} "
                f"| {e['ratio']:.3g} ({t['target']}) | {_required(t)} | "
                f"{target_verdict(pair_target(e))} |"
            )
    lines += [
        "",
        "`*` per-draw loops: the time of a short run (the rate is extrapolated to the "
        "workload's S). Peak MiB: XLA temporaries + outputs for JAX code, the tracemalloc "
        "peak of one call for Python/NumPy. Floor: max(random numbers / RNG rate, "
        "transcendentals / exp rate, bytes / bandwidth) for the law the benchmark samples.",
        "",
        "| target | measured | required | verdict |",
        "|---|---|---|---|",
    ]
    for t in payload["targets"]:
        v = "-" if t["value"] is None else f"{t['value']:.3g}"
        verdict = target_verdict(t)
        lines.append(f"| {t['target']} ({t['detail']}) | {v} | {_required(t)} | {verdict} |")
    if payload["notes"]:
        lines += ["", "Notes:", ""] + [f"- {n}" for n in payload["notes"]]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- files and plots


def load(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def write(payload: dict, out: Path, *, plots: bool, compare: dict | None = None) -> list[Path]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    mode = payload["mode"]
    pngs = _plots(payload, out, compare) if plots else []
    paths = [out / f"results_{mode}.json", out / f"results_{mode}.md"]
    paths[0].write_text(json.dumps(payload, indent=1, default=str) + "\n")
    paths[1].write_text(markdown(payload) + "\n")
    return paths + pngs


def _stamp(payload: dict) -> str:
    """The machine and date line every plot carries."""
    m = payload["machine"]
    gpu = f", GPU {', '.join(m['gpus'])}" if m.get("gpus") else ""
    return (
        f"{m['cpu_model']}, {m['cores']} cores{gpu}; jax {m['jax']}; "
        f"{payload['mode']} run, {payload['created'][:10]}"
    )


def _finish(fig, ax_or_none, payload: dict, path: Path, plt) -> Path:
    fig.text(0.01, 0.005, _stamp(payload), fontsize=7, color="0.35", ha="left", va="bottom")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _plots(payload: dict, out: Path, compare: dict | None) -> list[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        payload["notes"].append("plots skipped: matplotlib is not installed ([bench] extra)")
        return []
    mode = payload["mode"]
    multi = len(payload["backends"]) > 1
    res = [e for e in payload["results"] if "skipped" not in e and e["workload"].startswith("W")]
    written: list[Path] = []

    # 1. W1 throughput against n: lines on log-log axes, one per implementation.
    fig, ax = plt.subplots(figsize=(8, 5))
    series: dict[str, list[tuple[int, float]]] = {}
    for e in res:
        if e["workload"] != "W1" or e["law"] != "em":
            continue
        if e["draws_per_row"] != max(x["draws_per_row"] for x in res if x["n"] == e["n"]):
            continue
        name = label(e) + (f" [{e['backend']}]" if multi else "")
        series.setdefault(name, []).append((e["n"], e["draws_per_s"]))
    for name, pts in sorted(series.items()):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=name)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="candidates n (log scale)",
        ylabel="draws per second (log scale)",
        title="W1: one score vector, many draws from the exponential mechanism\n"
        "(largest S measured per n; higher is faster)",
    )
    ax.grid(True, which="both", alpha=0.3)
    if series:
        ax.legend(fontsize=7, title="implementation", title_fontsize=8)
    written.append(_finish(fig, ax, payload, out / f"{mode}_w1_throughput_vs_n.png", plt))

    # 2. The exponential mechanism against report-noisy-max: a dot plot (no bars on a log axis).
    groups = [
        ("n = 1,000 candidates, S = 10,000 draws", [e for e in res if "_n1e3_s1e4" in e["name"]]),
        ("n = 1,000 candidates, B = 10,000 rows", [e for e in res if "_n1e3_b1e4" in e["name"]]),
    ]
    colours = {"em": "tab:blue", "noise": "tab:orange", "continuous": "tab:green"}
    words = {
        "em": "exponential-mechanism law",
        "noise": "noisy-max law (Laplace / exponential noise)",
        "continuous": "continuous range",
    }
    fig, axes = plt.subplots(1, 2, figsize=(12, 5))
    for ax, (title, es) in zip(axes, groups, strict=True):
        es = sorted(es, key=lambda e: e["candidates_per_s"])
        names = [label(e) + (f" [{e['backend']}]" if multi else "") for e in es]
        y = list(range(len(es)))
        ax.hlines(y, 0, 1, transform=ax.get_yaxis_transform(), colors="0.9", lw=0.8, zorder=0)
        for law in ("em", "noise"):
            pts = [(i, e["candidates_per_s"]) for i, e in enumerate(es) if e["law"] == law]
            if pts:
                ax.plot(
                    [p[1] for p in pts],
                    [p[0] for p in pts],
                    "o",
                    color=colours[law],
                    label=words[law],
                )
        ax.set_yticks(y, names, fontsize=7)
        ax.set(
            xscale="log",
            xlabel="candidates scored per second (log scale; right is faster)",
            title=title,
        )
        ax.grid(True, axis="x", which="both", alpha=0.3)
        if es:
            ax.legend(fontsize=7, loc="lower right")
        else:
            ax.text(0.5, 0.5, "not measured in this run", ha="center", transform=ax.transAxes)
            ax.set_xticks([])
    fig.suptitle("Exponential mechanism against report-noisy-max, same workload")
    written.append(_finish(fig, None, payload, out / f"{mode}_em_vs_rnm.png", plt))

    # 3. CPU against GPU, when both exist (this run, or this run and --compare).
    by_backend: dict[str, dict[str, dict]] = {}
    for p in [payload] + ([compare] if compare else []):
        for e in p["results"]:
            if "skipped" in e or e["library"] not in ("jaxdp", "jax"):
                continue
            if not e["workload"].startswith("W"):
                continue
            by_backend.setdefault(e["backend"], {})[e["name"]] = e
    if "cpu" in by_backend and "gpu" in by_backend:
        names = sorted(set(by_backend["cpu"]) & set(by_backend["gpu"]))
        fig, ax = plt.subplots(figsize=(9, 0.3 * len(names) + 2))
        y = list(range(len(names)))
        ax.plot([by_backend["cpu"][k]["draws_per_s"] for k in names], y, "o", label="CPU")
        ax.plot([by_backend["gpu"][k]["draws_per_s"] for k in names], y, "s", label="GPU")
        ax.set_yticks(y, [f"{label(by_backend['cpu'][k])}, {_shape(by_backend['cpu'][k])}"
                          for k in names], fontsize=6)  # fmt: skip
        ax.set(
            xscale="log",
            xlabel="draws per second (log scale; right is faster)",
            title="The same JAX code on CPU and on GPU",
        )
        ax.grid(True, axis="x", which="both", alpha=0.3)
        ax.legend(title="backend")
        written.append(_finish(fig, ax, payload, out / f"{mode}_cpu_vs_gpu.png", plt))
    else:
        payload["notes"].append(
            "CPU-vs-GPU plot not drawn: this run has one backend (pass --backend all on a GPU "
            "machine, or --compare another run's JSON)"
        )
    return written
