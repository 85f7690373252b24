"""jaxdp._tuning: the per-backend rules, called with the backend as a parameter (so the
GPU rules are checked on CPU), and the staging of the chunked kernels per platform."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export

import jaxdp
from jaxdp import _descent, _measure, _noisy_kernels, _tabulated, _tuning

# The shapes of issue 11: a (100000, 1000) Gumbel call (one draw per row), and
# 10**6 draws over one row of n = 1000.
ISSUE_SHAPES = [(1, 100_000, 1000), (10**6, 1, 1000)]  # (draws per row, rows, n)


def test_platform_kinds():
    assert _tuning.kind("cpu") == "cpu"
    assert {_tuning.kind(p) for p in ("cuda", "rocm", "tpu", "gpu")} == {"gpu"}
    assert _tuning.kind() == _tuning.kind(jax.default_backend())
    for table in (
        _tuning.RACE_CHUNK,
        _tuning.TABLE_CHUNK,
        _tuning.ALIAS_DRAWS_PER_COLUMN,
        _tuning.ALIAS_MIN_DRAWS,
        _tuning.TABLE_MAX_CANDIDATES,
        _tuning.TABLE_COST,
        _tuning.KERNEL_DRAW_COST,
        _tuning.ALIAS_DRAW_COST,
        _tuning.GUMBEL_MAX_CANDIDATES,
        _tuning.SELECTION_BLOCK,
    ):
        assert set(table) == set(_tuning.KINDS)


@pytest.mark.parametrize(("draws", "rows", "n"), ISSUE_SHAPES)
def test_gpu_race_takes_a_handful_of_steps(draws, rows, n):
    gpu, cpu = _tuning.race_chunk("cuda"), _tuning.race_chunk("cpu")
    assert _noisy_kernels.race_steps(draws, rows, n, gpu) <= 8
    assert _noisy_kernels.race_steps(draws, rows, n, cpu) >= 300  # what the issue measured
    layout, _, steps = _measure.race_plan(draws, rows, n, gpu)
    assert layout == "draws" and steps <= 8


def test_gpu_race_steps_stay_few_on_large_shapes():
    """No shape up to 2**33 noise values serialises into more than 64 steps on GPU."""
    chunk = _tuning.race_chunk("gpu")
    for draws in (1, 7, 1000, 10**6):
        for rows in (1, 3, 1000, 10**5):
            for n in (2, 1000, 10**5, 10**7):
                if draws * rows * n <= 2**33:
                    assert _noisy_kernels.race_steps(draws, rows, n, chunk) <= 64


def test_gpu_table_is_one_step_at_the_largest_row():
    n = _tuning.TABLE_MAX_CANDIDATES["gpu"]
    m = (n + 1) // 2
    per = max(1, min(m, _tuning.table_chunk("gpu") // n))
    assert per == m


def test_largest_divisor_matches_the_scan():
    for total in (1, 2, 12, 97, 360, 1000, 4096, 99991):
        for most in (1, 2, 5, 64, 1000, 10**6):
            want = max(d for d in range(1, min(most, total) + 1) if total % d == 0)
            assert _noisy_kernels._largest_divisor(total, min(most, total)) == want


def _export_text(platform, fn, *specs):
    return export.export(jax.jit(fn), platforms=[platform])(*specs).mlir_module()


def test_lowered_for_gpu_the_race_is_not_a_loop():
    """Lowered for CUDA (no GPU needed), the (100000, 1000) Gumbel call is one fused
    step; lowered for CPU it is a loop over cache-sized chunks."""

    def fn(key_data, x):
        key = jax.random.wrap_key_data(key_data)
        return jaxdp.exponential(key, x, epsilon=1.0, sensitivity=1.0, method="gumbel")

    specs = (jax.ShapeDtypeStruct((2,), jnp.uint32), jax.ShapeDtypeStruct((10**5, 1000), "f4"))
    assert not re.search(r"stablehlo\.while", _export_text("cuda", fn, *specs))
    assert re.search(r"stablehlo\.while", _export_text("cpu", fn, *specs))


def test_staged_runs_this_platforms_plan():
    def build(value):
        return lambda x: x * value

    x = jnp.ones(3)
    plans = {"cpu": 2.0, "gpu": 3.0}
    here = plans[_tuning.kind()] * np.ones(3)
    np.testing.assert_array_equal(_tuning.staged(plans.get, build, x), here)
    np.testing.assert_array_equal(jax.jit(lambda x: _tuning.staged(plans.get, build, x))(x), here)
    cpu = jax.devices("cpu")[0]
    with jax.default_device(cpu):
        on_cpu = jax.jit(lambda x: _tuning.staged(plans.get, build, x))(jax.device_put(x, cpu))
    np.testing.assert_array_equal(on_cpu, 2.0 * np.ones(3))


def test_auto_rule_is_static_and_the_same_on_both_kinds():
    """The unstaged choices between kernels agree across kinds (so reading the default
    backend is exact for them; see jaxdp._tuning), and the auto rule's Gumbel region
    is small. The layout rules and the Laplace table rule differ, and are staged (next
    tests)."""
    for s in (1, 2, 64, 300, 1024, 5000):
        for n in (2, 16, 17, 300, 1000):
            assert _tuning.choose_method(s, n, 1, "cpu") == _tuning.choose_method(s, n, 1, "cuda")
            for noise in ("exponential",):
                assert _tuning.use_table(noise, s, n, "cpu") == _tuning.use_table(
                    noise, s, n, "cuda"
                )
    assert _tuning.choose_method(1, _tuning.GUMBEL_MAX_CANDIDATES["cpu"], 1, "cpu") == "gumbel"
    assert _tuning.choose_method(2, 2, 1, "cpu") == "inverse_cdf"
    assert _tuning.selection_block(3) == 3 and _tuning.selection_block(10**6) == 16


def test_gpu_draws_laplace_noise_by_the_race():
    """On a GPU a draw below the top score costs more than a race draw (H100
    measurements in jaxdp._tuning), so Laplace noise is never tabulated there; the
    CPU tabulates it at many draws per row."""
    assert _tuning.LAPLACE_BELOW_COST["gpu"] >= 1.0
    for n in (2, 20, 1000, _tuning.TABLE_MAX_CANDIDATES["gpu"]):
        for s in (2, 10**4, 10**6, 10**9):
            assert not _tuning.use_table("laplace", s, n, "cuda")
    assert _tuning.use_table("laplace", 10**5, 1000, "cpu")


def test_laplace_table_rule_is_staged_per_platform():
    """report_noisy_max stages the Laplace choice: lowered for CUDA (no GPU needed) a
    call of 10**5 draws over 1000 candidates is the race in one step, with no loop;
    lowered for CPU it is the table, whose conditioned race is a loop, and so is the
    race there (cache-sized chunks): the CPU module holds the table's alias draws."""

    def fn(key_data, x):
        key = jax.random.wrap_key_data(key_data)
        return jaxdp.report_noisy_max(
            key, x, epsilon=1.0, sensitivity=1.0, noise="laplace", shape=(10**5,)
        )

    specs = (jax.ShapeDtypeStruct((2,), jnp.uint32), jax.ShapeDtypeStruct((1000,), "f4"))
    cuda, cpu = _export_text("cuda", fn, *specs), _export_text("cpu", fn, *specs)
    assert not re.search(r"stablehlo\.while", cuda)
    assert re.search(r"stablehlo\.while", cpu)
    assert len(cpu) > 2 * len(cuda)  # the table, its first stage and the conditioned race


def test_tabulated_dispatch_reads_the_tuning_tables(monkeypatch):
    assert _tabulated.use_table("exponential", 10**6, 1000)
    monkeypatch.setitem(_tuning.TABLE_MAX_CANDIDATES, _tuning.kind(), 999)
    assert not _tabulated.use_table("exponential", 10**6, 1000)


def test_gpu_layout_rule_takes_the_descent_up_to_2_18_draws():
    """On a GPU (H100 measurements in jaxdp._tuning) the descent takes every call up
    to 2**18 draws per row, the alias table from there (and one draw per column), and
    no hybrid; the CPU's rule is unchanged."""
    for n in (9, 1000, 10**4, 10**5, 2**18):
        for rows in (1, 4, 64):
            for s in (1, 256, 10**4, (1 << 18) - 1):
                assert _tuning.layout(n, s, "cuda", rows) == "descent"
                assert _tuning.hybrid_depth(n, s, "cuda", rows) == 0
            assert _tuning.layout(n, 1 << 18, "cuda", rows) == "alias"
    assert _tuning.layout(2**20, 2**19, "cuda") == "descent"
    assert _tuning.layout(2**20, 2**20, "cuda") == "alias"
    assert _tuning.layout(1000, 10**4, "cpu") == "alias"
    assert _tuning.layout(10**5, 10**4, "cpu") == "hybrid"


def _has_platform_index(n, draws):
    w = jnp.ones((1, n), jnp.float32)
    jaxpr = jax.make_jaxpr(lambda k, w: _descent.sample(k, w, draws))(jax.random.key(0), w)
    return "platform_index" in str(jaxpr)


def test_categorical_kernel_stages_the_layout_where_the_kinds_differ():
    """Where the CPU's and the GPU's layouts differ, the program holds both, chosen by
    the platform it is compiled for; where they agree, one program."""
    assert _tuning.layout(1000, 10**4, "cpu") != _tuning.layout(1000, 10**4, "cuda")
    assert _has_platform_index(1000, 10**4)
    assert _tuning.layout(1000, 10**6, "cpu") == _tuning.layout(1000, 10**6, "cuda")
    assert not _has_platform_index(1000, 10**6)
    assert not _has_platform_index(1000, 1)


def test_categorical_kernel_lowered_for_each_platform():
    """Lowered for CUDA (no GPU needed), n = 1000 drawn 10**4 times is the descent: no
    alias table's binary searches; lowered for CPU, the table's."""

    def fn(key_data, w):
        return _descent.sample(jax.random.wrap_key_data(key_data), w, 10**4)[0]

    specs = (jax.ShapeDtypeStruct((2,), jnp.uint32), jax.ShapeDtypeStruct((1, 1000), "f4"))
    cuda, cpu = _export_text("cuda", fn, *specs), _export_text("cpu", fn, *specs)
    assert cuda != cpu
    assert len(re.findall(r"stablehlo\.while", cuda)) < len(re.findall(r"stablehlo\.while", cpu))
