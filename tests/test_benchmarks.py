"""A tiny run of ``python -m benchmarks``, so that the suite cannot rot."""

import contextlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from benchmarks import __main__ as cli  # noqa: E402
from benchmarks import _floors, _paths, _report, _shapes, _suite  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SMOKE = (
    "exponential_auto_n1e3_s1e4|numpy_choice_n1e3|textbook_loop|hand_jax_inverse_cdf_n1e3"
    "|report_noisy_max_laplace_n1e2_s1e2|numpy_laplace_argmax_n1e2_s1e2|exponential_auto_n1e2_b2e2"
)


def _committed_state() -> str:
    out = subprocess.run(
        ["git", "status", "--porcelain", "--", "benchmarks/results"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    return out.stdout if out.returncode == 0 else "(not a git checkout)"


def test_smoke_run_writes_json_markdown_and_plots_outside_the_source_tree(
    tmp_path, monkeypatch, capsys
):
    before = _committed_state()
    monkeypatch.chdir(tmp_path)  # no --out: results go to ./jaxdp-results/<machine>/
    assert cli.main(["--smoke", "--only", SMOKE, "--no-progress"]) == 0
    (folder,) = (tmp_path / "jaxdp-results").iterdir()
    assert folder.name.startswith("cpu-")
    assert _committed_state() == before  # the committed results were not touched
    payload = json.loads((folder / "results_smoke.json").read_text())
    assert payload["schema"] == _report.SCHEMA_VERSION
    names = {e["name"] for e in payload["results"]}
    assert "exponential_auto_n1e3_s1e4_f32" in names
    assert "numpy_choice_n1e3_s1e4_f64" in names
    for e in payload["results"]:
        assert "skipped" not in e, e
        assert e["draws_per_s"] > 0 and e["median_s"] > 0
        assert e["peak_bytes"] is None or e["peak_bytes"] >= 0
        if e["library"] in ("jaxdp", "jax"):
            assert e["compile_s"] > 0
        assert e["fraction_of_floor"] > 0
    textbook = next(e for e in payload["results"] if e["name"].startswith("textbook"))
    assert textbook["extrapolated_from_draws"] == _suite.MODES["smoke"]["loop_draws"]
    machine = payload["machine"]
    for field in ("cpu_model", "cores", "jax", "jaxlib", "commit", "gpus"):
        assert field in machine
    rates = payload["rates"]["cpu"]
    assert rates["rng_per_s"] > 0 and rates["exp_per_s"] > 0 and rates["bytes_per_s"] > 0
    assert {t["target"].split(" ")[0] for t in payload["targets"]} >= {"W1", "W2", "W3"}
    md = (folder / "results_smoke.md").read_text()
    assert md.startswith("## jaxdp benchmarks")
    assert "| benchmark |" in md and "| target |" in md and "fastest peer" in md
    assert (folder / "smoke_w1_throughput_vs_n.png").stat().st_size > 0
    assert (folder / "smoke_em_vs_rnm.png").stat().st_size > 0
    captured = capsys.readouterr()
    out = captured.out
    # The terminal gets the compact summary, not the full markdown table.
    assert "fastest peer" in out and "Targets" in out and "| benchmark |" not in out
    summary = out[out.index("fastest peer") : out.index("Notes:") if "Notes:" in out else None]
    assert max(len(line) for line in summary.splitlines()) <= 110
    assert "[1/" in captured.err  # without a terminal: one counted line per benchmark


def test_update_committed_and_out_choose_the_folder(tmp_path):
    assert _paths.output_dir(None, False, "x") == Path("jaxdp-results") / "x"
    assert _paths.output_dir(tmp_path, False, "x") == tmp_path
    assert _paths.output_dir(None, True, "x") == ROOT / "benchmarks" / "results" / "x"
    with pytest.raises(SystemExit):  # --out and --update-committed exclude each other
        _suite.parse_args(["--out", str(tmp_path), "--update-committed"])


def test_targets_read_met_or_missed():
    met = {"met": True, "value": 2.5, "required": 1.5}
    missed = {"met": False, "value": 0.8, "required": 1.0}
    assert _report.target_verdict(met) == "met (2.5 vs >= 1.5)"
    assert _report.target_verdict(missed) == "missed (0.8 vs >= 1)"
    assert _report.target_verdict({"met": None, "value": None, "required": 1}) == "not measured"
    slower = {"met": False, "value": 1.8, "required": 1.3, "op": "<="}
    assert _report.target_verdict(slower) == "missed (1.8 vs <= 1.3)"


def test_labels_are_words():
    assert _report.label({"name": "exponential_auto_n1e3_s1e6_f32"}).startswith("jaxdp.")
    assert _report.label({"name": "top_k_k10_n1e3_s1e4_f32"}) == "jaxdp.top_k (k=10)"
    rbg = _report.label({"name": "exponential_gumbel_n1e3_s1e4_f32_rbg"})
    assert rbg == "jaxdp.exponential (Gumbel), rbg keys"


@pytest.mark.parametrize(
    "command", [[], ["suite"], ["crossover"], ["tuning"], ["pricing"], ["study"]]
)
def test_every_subcommand_has_help(command, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main([*command, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m benchmarks")
    if command == ["study"]:
        assert "selection_studies" in out and "utility-theorem" in out


def test_subcommands_dispatch_and_report_missing_modules(capsys, monkeypatch):
    assert cli._delegate("no_such_benchmark_module", [], "pricing") == 2
    assert "not available" in capsys.readouterr().err
    assert cli.main(["study", "no-such-study"]) == 2
    assert "unknown study" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["study"])  # NAME is required
    with pytest.raises(SystemExit):
        cli.main(["no-such-command"])
    # A selection study dispatches to benchmarks/selection_studies.py, or says it is absent.
    calls = []

    class Fake:
        STUDIES = {"joint-top-k": None}

        @staticmethod
        def main(argv):
            calls.append(argv)
            return 0

    real = cli._import
    monkeypatch.setattr(cli, "_import", lambda m: Fake if m == "selection_studies" else real(m))
    assert cli.main(["study", "joint-top-k", "--scale", "0.1"]) == 0
    assert calls == [["joint-top-k", "--scale", "0.1"]]
    # --update-committed writes where the README links every study's results.
    assert cli.main(["study", "joint-top-k", "--update-committed"]) == 0
    assert calls[-1] == ["joint-top-k", "--out", str(ROOT / "benchmarks" / "results" / "studies")]
    monkeypatch.setattr(cli, "_import", lambda m: None if m == "selection_studies" else real(m))
    assert cli.main(["study", "joint-quantiles"]) == 2
    assert "not in this checkout" in capsys.readouterr().err


def test_cli_runs_as_a_module(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "suite" in proc.stdout and "study" in proc.stdout


def test_names_and_floors():
    assert _suite.fmt(1000) == "1e3" and _suite.fmt(10) == "1e1" and _suite.fmt(200_000) == "2e5"
    needs = _floors.workload_needs("em", n=1000, draws=10**6, rows=1)
    assert needs["randoms"] == 1e6 and needs["transcendentals"] == 1e3
    noise = _floors.workload_needs("noise", n=1000, draws=10**4, rows=1, logs_per_noise=2)
    assert noise["randoms"] == 1e7 and noise["transcendentals"] == 2e7
    floor = _floors.floor_seconds(needs, {"rng_per_s": 1e8, "exp_per_s": 1e9, "bytes_per_s": 1e10})
    assert floor["bound"] == "rng" and floor["floor_s"] == pytest.approx(1e-2)
    assert _floors.gpu_named_floors("NVIDIA H100 80GB HBM3")["hbm_bytes_per_s"] == 3.0e12
    assert _floors.gpu_named_floors("NVIDIA H200")["hbm_bytes_per_s"] == 4.3e12


def test_call_shapes_cover_the_issue_and_build_in_every_mode():
    for mode in _suite.MODES:
        pairs = _shapes.pairs(mode)
        names = [p.name for p in pairs]
        assert len(set(names)) == len(names)
        assert {p.workload for p in pairs} == {f"C{i}" for i in range(1, 7)}
        for p in pairs:
            assert p.name.startswith(p.workload.lower() + "_")
            assert (p.op is None) == (p.required is None)
    quick = _shapes.SIZES["quick"]
    assert quick["c1"] == (256, 32768) and quick["c2"] == (12, 1024, 1000)
    assert [n for n, _ in quick["c4"]] == [10, 1000, 10**4, 10**5] and quick["c5"] == (1000, 10**5)


def test_call_shapes_report_ratio_and_target(tmp_path, monkeypatch):
    import jax.numpy as jnp

    def cheap(mode_name):  # stand-ins: the plumbing, not jaxdp's kernels
        args = lambda: (jnp.arange(8.0),)  # noqa: E731
        specs = (jnp.zeros(8),)
        return [
            _shapes.Pair(
                "c9_fake_slowdown_n8_s1", "C9", "x * 2", "x + 1", 8, 1, 1,
                _shapes._jit(lambda x: x * 2, args), _shapes._jit(lambda x: x + 1, args),
                "slowdown", "<=", 1e9, "fake / twin time",
            ),
            _shapes.Pair(
                "c9_fake_speedup_n8_s1", "C9", "x * 2", "x + 1", 8, 1, 1,
                _shapes._jit(lambda x: x * 2, args), _shapes._jit(lambda x: x + 1, args),
                "speedup", ">=", 1e9, "twin / fake time",
            ),
            _shapes.Pair(
                "c9_fake_compile", "C9", "compile x * 2", "compile x + 1", 8, 1, 1,
                _shapes._cold(lambda x: x * 2, specs), _shapes._cold(lambda x: x + 1, specs),
                "slowdown", None, None, "fake compile time", metric="compile",
            ),
        ]  # fmt: skip

    monkeypatch.setattr(_shapes, "pairs", cheap)
    argv = ["--smoke", "--only", "^c9_", "--no-progress", "--no-plots", "--out", str(tmp_path)]
    assert cli.main(argv) == 0
    payload = json.loads((tmp_path / "results_smoke.json").read_text())
    rows = {e["name"]: e for e in payload["results"]}
    assert set(rows) == {"c9_fake_slowdown_n8_s1", "c9_fake_speedup_n8_s1", "c9_fake_compile"}
    for e in rows.values():
        assert "skipped" not in e, e
        assert e["ratio"] > 0 and len(e["ratios"]) == len(e["times"]) == len(e["twin"]["times"])
    assert rows["c9_fake_compile"]["draws_per_s"] is None
    targets = {t["detail"]: t for t in payload["targets"] if t["target"].startswith("C9")}
    assert targets["c9_fake_slowdown_n8_s1"]["met"] is True  # <= 1e9
    assert targets["c9_fake_speedup_n8_s1"]["met"] is False  # >= 1e9
    assert targets["c9_fake_compile"]["met"] is None
    assert _report.target_verdict(targets["c9_fake_compile"]).startswith("reported")
    md = (tmp_path / "results_smoke.md").read_text()
    assert "Call shapes against their fast twins" in md and "c9_fake_compile" in md
    assert "missed (" in md and "<= 1e+09" in md


def test_tuning_sections_run_and_restore_the_tables(monkeypatch):
    """A tiny grid of each ``python -m benchmarks tuning`` section: rows come out, and
    the overridden tuning tables are restored."""
    from benchmarks import tuning
    from jaxdp import _tuning

    monkeypatch.setattr(tuning, "MIN_TIME_S", {"quick": 0.0, "full": 0.0})  # one round a pair

    tables = (_tuning.RACE_CHUNK, _tuning.ALIAS_MIN_DRAWS, _tuning.HYBRID,
              _tuning.STRIDED_BLOCK_SUMS, _tuning.STRIDED_INT_ROW_MAX,
              _tuning.BLOCK_GATHER_MAX_ROWS, _tuning.ALIAS_SELECT_MAX_LOG2,
              _tuning.PREFIX_SUM_BLOCK, _tuning.DOT_BLOCK_SUMS,
              _tuning.DOT_PARTIAL_ONE_ROW_MIN_N)  # fmt: skip
    before = [dict(t) for t in tables]
    rule = _tuning.hybrid_depth
    grid = {"layout": [(1, 20, (1,))], "depth": [(1, 100, (20,))], "race": [(2, 10, 3)],
            "chunks": (16,), "table_n": (8,), "band": [(1, 1000, (20,))],
            "block_sums": [(2, 16, 1)], "block_sums_vmap": [(2, 16)],
            "int_max": [(2, 19)], "block_gather": [(1, 100, 20)],
            "alias_select": [(1, 10, 64), (3, 10, 64)],
            "prefix_sums": [(1, 100, 512), (2, 100, 512)],
            "dot_block_sums": [(2, 20, 1), (1, 100, 20)]}  # fmt: skip
    rows = tuning.layout_rows(grid, 1) + tuning.depth_rows(grid, 1)
    rows += tuning.race_chunk_rows(grid, 1) + tuning.table_chunk_rows(grid, 1)
    rows += tuning.band_rows(grid, 1) + tuning.block_sums_rows(grid, 1)
    rows += tuning.int_max_rows(grid, 1) + tuning.block_gather_rows(grid, 1)
    select = tuning.alias_select_rows(grid, 1)
    assert [r["name"] for r in select] == ["alias_select_b1_n10_s64", "alias_select_vmap3_n10_s64"]
    how = _tuning.layout(10, 64)  # the alias table on the CPU, the descent on a GPU
    assert all(r["select_over_gather"] > 0 and r["layout"] == how for r in select)
    assert select[0]["select_by_default"] == (4 <= _tuning.ALIAS_SELECT_MAX_LOG2[_tuning.kind()])
    dot = tuning.dot_block_sums_rows(grid, 1)
    assert [r["name"] for r in dot] == ["dot_block_sums_b2_n20_s1", "dot_block_sums_b1_n100_s20"]
    assert all(r["dot_over_reduce_window"] > 0 and r["strided_over_dot"] > 0 for r in dot)
    assert dot[0]["default"] == (
        "dot" if _tuning.DOT_BLOCK_SUMS[_tuning.kind()] else "reduce_window"
    )
    sums = tuning.prefix_sums_rows(grid, 1)
    assert [r["name"] for r in sums] == ["prefix_sums_b1_n100_s512", "prefix_sums_vmap2_n100_s512"]
    assert all(r["dot_over_cumsum"] > 0 and r["layout"] == _tuning.layout(100, 512) for r in sums)
    names = [r["name"] for r in rows]
    assert names == ["layout_b1_n20_s32", "depth_b1_n100_s20", "race_chunk_16_b2_n10_s3",
                     "table_chunk_16_n8", "band_b1_n1000_s20", "block_sums_b2_n16_s1_float32",
                     "block_sums_b2_n16_s1_int32", "block_sums_vmap_b2_n16_float32",
                     "int_max_b2_n19", "block_gather_b1_n100_s20"]  # fmt: skip
    assert rows[-3]["strided_over_reduce_window"] > 0 and not rows[-3]["strided_by_default"]
    assert rows[-2]["strided_over_max"] > 0
    assert rows[-1]["slices_over_scalar"] > 0 and rows[-1]["layout"] == _tuning.layout(100, 20)
    assert rows[4]["depth2_over_depth1"] > 0 and rows[4]["draws_per_depth1_column"] == 20 / 128
    assert rows[0]["chosen"] == _tuning.layout(20, 32)  # the rule of this backend
    assert rows[0]["hybrid_over_descent"] > 0 and rows[0]["hybrid_over_alias"] > 0
    assert rows[1]["depth1_over_descent"] > 0 and rows[1]["chosen"] == 0
    assert [dict(t) for t in tables] == before
    assert _tuning.hybrid_depth is rule


def test_w2_probe_runs_and_its_block_sums_agree(tmp_path, monkeypatch):
    """``benchmarks/w2_probe.py`` on a tiny shape writes every line, and its three
    formulations of the leaves' block sums are the same sums (up to the order of
    each block's additions); ``device_check.sh``, which runs it, parses."""
    import jax
    import numpy as np

    from benchmarks import w2_probe

    monkeypatch.setattr(w2_probe, "SHAPES", [(4, 64)])
    out = w2_probe.main(str(tmp_path))
    names = [f"B4_n64_{v}" for v in w2_probe.variants()]
    assert all(out[k] > 0 for k in names)
    assert json.loads((tmp_path / "w2_probe.json").read_text()).keys() == out.keys()
    x = jax.random.normal(jax.random.key(3), (5, 96)) * 3
    v = w2_probe.variants()
    sums = [np.asarray(v[f"sums_{how}"](None, x)) for how in ("window", "strided", "reshape")]
    assert sums[0].shape == (5, 12)
    for other in sums[1:]:
        np.testing.assert_allclose(other, sums[0], rtol=8 * 2.0**-24, atol=0)
    sh = subprocess.run(["bash", "-n", str(ROOT / "benchmarks" / "device_check.sh")])
    assert sh.returncode == 0


def test_forced_layouts_take_their_layout():
    """The overrides behind the layout rows force each layout at any size."""
    from benchmarks import tuning
    from jaxdp import _tuning

    for how, overrides in tuning.FORCE.items():
        for n, s, rows in ((20, 1, 1), (1000, 1024, 1), (5000, 10**6, 4)):
            with contextlib.ExitStack() as stack:
                for table, value in overrides:
                    stack.enter_context(tuning.override(table, value))
                assert _tuning.layout(n, s, num_rows=rows) == how, (how, n, s, rows)


def test_forced_depth_takes_its_depth():
    """The override behind the depth rows forces each depth, and restores the rule."""
    from benchmarks import tuning
    from jaxdp import _descent, _tuning

    rule = _tuning.hybrid_depth
    for depth in (0, 2, 4):
        with tuning.forced_depth(depth):
            assert _descent.hybrid_depth(10**5, 10**4) == depth
            assert (_tuning.layout(10**5, 10**4) == "hybrid") == (depth > 0)
    assert _tuning.hybrid_depth is rule
    assert _descent.hybrid_depth(10**5, 10**4) == rule(10**5, 10**4)
    assert rule(10**5, 10**4, "cpu") == 2


def test_interleaved_timing_runs_to_its_minimum_time():
    """Fast calls are timed for ``min_time_s`` (up to ``max_rounds``), not ``repeats``
    rounds; cold calls keep their repeats."""
    from benchmarks._timing import time_interleaved

    ts, tt, ratios = time_interleaved(lambda: None, lambda: None, repeats=3, budget_s=1.0,
                                      min_time_s=0.05, max_rounds=50)  # fmt: skip
    assert len(ts) == len(tt) == len(ratios) == 50
    ts, _, _ = time_interleaved(lambda: None, lambda: None, repeats=3, budget_s=1.0)
    assert len(ts) == 3
