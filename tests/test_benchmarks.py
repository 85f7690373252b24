"""A tiny run of ``python -m benchmarks``, so that the suite cannot rot."""

import json

import pytest

pytest.importorskip("matplotlib")

from benchmarks import __main__ as cli  # noqa: E402
from benchmarks import _floors, _suite  # noqa: E402

SMOKE = (
    "exponential_auto_n1e3_s1e4|numpy_choice_n1e3|textbook_loop|hand_jax_inverse_cdf_n1e3"
    "|report_noisy_max_laplace_n1e2_s1e2|numpy_laplace_argmax_n1e2_s1e2|exponential_auto_n1e2_b2e2"
)


def test_smoke_run_writes_json_markdown_and_plots(tmp_path, capsys):
    assert cli.main(["--smoke", "--only", SMOKE, "--out", str(tmp_path)]) == 0
    payload = json.loads((tmp_path / "results_smoke.json").read_text())
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
    assert (tmp_path / "results_smoke.md").read_text().startswith("## jaxdp benchmarks")
    assert (tmp_path / "smoke_w1_throughput_vs_n.png").stat().st_size > 0
    assert (tmp_path / "smoke_em_vs_rnm.png").stat().st_size > 0
    out = capsys.readouterr().out
    assert "| benchmark |" in out and "| target |" in out


def test_subcommands_dispatch_and_report_missing_modules(capsys):
    assert cli._delegate("no_such_benchmark_module", [], "pricing") == 2
    assert "not available" in capsys.readouterr().err
    assert cli.main(["study"]) == 2
    with pytest.raises(SystemExit):
        cli.main(["--help"])


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
