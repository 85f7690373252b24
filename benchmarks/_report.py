"""Targets, the markdown table, the JSON file and the plots of a suite run."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

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


def progress(entry: dict, wall: float) -> None:
    if "skipped" in entry:
        line = f"  {entry['name']:<52} skipped: {entry['skipped']}"
    else:
        line = (
            f"  {entry['name']:<52} {_si(entry['draws_per_s']):>9} draws/s  "
            f"median {_ms(entry['median_s'])} ms  ({wall:.1f} s)"
        )
    print(line, file=sys.stderr, flush=True)


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

    def add(target: str, value: float | None, required: float, detail: str) -> None:
        out.append(
            {
                "target": target,
                "value": value,
                "required": required,
                "met": None if value is None else bool(value >= required),
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
    lines += [
        "",
        "`*` per-draw loops: the time of a short run (the rate is extrapolated to the "
        "workload's S). Peak MiB: XLA temporaries + outputs for JAX code, the tracemalloc "
        "peak of one call for Python/NumPy. Floor: max(random numbers / RNG rate, "
        "transcendentals / exp rate, bytes / bandwidth) for the law the benchmark samples.",
        "",
        "| target | measured | required | met |",
        "|---|---|---|---|",
    ]
    for t in payload["targets"]:
        v = "-" if t["value"] is None else f"{t['value']:.3g}"
        met = "not measured" if t["met"] is None else ("yes" if t["met"] else "**no**")
        lines.append(f"| {t['target']} ({t['detail']}) | {v} | >= {t['required']:g} | {met} |")
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


def _plots(payload: dict, out: Path, compare: dict | None) -> list[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        payload["notes"].append("plots skipped: matplotlib is not installed ([bench] extra)")
        return []
    mode = payload["mode"]
    res = [e for e in payload["results"] if "skipped" not in e]
    written: list[Path] = []

    # 1. W1 throughput against n.
    fig, ax = plt.subplots(figsize=(7, 4.5))
    series: dict[str, list[tuple[int, float]]] = {}
    for e in res:
        if e["workload"] != "W1" or e["law"] != "em":
            continue
        label = e["name"].split("_n")[0] + (
            f" [{e['backend']}]" if len(payload["backends"]) > 1 else ""
        )
        if e["draws_per_row"] != max(x["draws_per_row"] for x in res if x["n"] == e["n"]):
            continue
        series.setdefault(label, []).append((e["n"], e["draws_per_s"]))
    for label, pts in sorted(series.items()):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=label)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="candidates n",
        ylabel="draws / s",
        title="W1: one score vector, many draws (largest S per n)",
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    written.append(out / f"{mode}_w1_throughput_vs_n.png")
    fig.savefig(written[-1], dpi=110)
    plt.close(fig)

    # 2. The exponential mechanism against report-noisy-max (candidates/s).
    groups = [
        ("W1 noise shape", [e for e in res if "_s1e4" in e["name"] and e["n"] == 1000]),
        ("W2 shape", [e for e in res if "_n1e3_b1e4" in e["name"]]),
    ]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for ax, (title, es) in zip(axes, groups, strict=True):
        es = sorted(es, key=lambda e: -e["candidates_per_s"])
        ax.barh(
            [e["name"].rsplit("_n", 1)[0] + f" [{e['backend']}]" for e in es],
            [e["candidates_per_s"] for e in es],
            color=["tab:blue" if e["law"] == "em" else "tab:orange" for e in es],
        )
        ax.set(xscale="log", xlabel="candidates scored / s", title=f"{title}: EM (blue) vs RNM")
        ax.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    written.append(out / f"{mode}_em_vs_rnm.png")
    fig.savefig(written[-1], dpi=110)
    plt.close(fig)

    # 3. CPU against GPU, when both exist (this run, or this run and --compare).
    by_backend: dict[str, dict[str, float]] = {}
    for p in [payload] + ([compare] if compare else []):
        for e in p["results"]:
            if "skipped" in e or e["library"] not in ("jaxdp", "jax"):
                continue
            by_backend.setdefault(e["backend"], {})[e["name"]] = e["draws_per_s"]
    if "cpu" in by_backend and "gpu" in by_backend:
        names = sorted(set(by_backend["cpu"]) & set(by_backend["gpu"]))
        fig, ax = plt.subplots(figsize=(8, 0.3 * len(names) + 1.5))
        y = list(range(len(names)))
        ax.barh([i - 0.2 for i in y], [by_backend["cpu"][k] for k in names], 0.4, label="cpu")
        ax.barh([i + 0.2 for i in y], [by_backend["gpu"][k] for k in names], 0.4, label="gpu")
        ax.set_yticks(y, names, fontsize=6)
        ax.set(xscale="log", xlabel="draws / s", title="CPU against GPU")
        ax.legend()
        fig.tight_layout()
        written.append(out / f"{mode}_cpu_vs_gpu.png")
        fig.savefig(written[-1], dpi=110)
        plt.close(fig)
    else:
        payload["notes"].append(
            "CPU-vs-GPU plot not drawn: this run has one backend (pass --backend all on a GPU "
            "machine, or --compare another run's JSON)"
        )
    return written
