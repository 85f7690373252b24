"""Tests of jaxdp.montecarlo: the sharded, batched Monte Carlo driver."""

from __future__ import annotations

import inspect
import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

import jaxdp
from jaxdp import montecarlo, utility

REPO = Path(__file__).resolve().parents[1]
KEY = jax.random.key(0)

SCORES = -jnp.arange(50.0)  # the gap of outcome r is r


def em_trial(key, epsilon):
    r = jaxdp.exponential(key, SCORES, epsilon=epsilon, sensitivity=1.0)
    u = jax.random.uniform(jax.random.fold_in(key, 7), (3,))
    return {"gap": -SCORES[r], "idx": r, "u": u, "hit": r == 0}


# Most tests share one compiled step (same trial, batch and bins): compiling is the
# expensive part on a small CPU.
BATCH = 4096
BINS = {"idx": 50, "u": np.linspace(0.0, 1.0, 11)}
EM = dict(batch_size=BATCH, bins=BINS, progress=False)

# The same code runs in the 8-device subprocess (tests/ is not an importable package).
TRIAL_SOURCE = "SCORES = -jnp.arange(50.0)\n" + inspect.getsource(em_trial)


def uniform_trial(key):
    return jax.random.uniform(key)


def assert_same(a, b):
    """Every field of two summary pytrees is bit-identical."""
    la = jax.tree_util.tree_leaves(a, is_leaf=lambda x: isinstance(x, montecarlo.Summary))
    lb = jax.tree_util.tree_leaves(b, is_leaf=lambda x: isinstance(x, montecarlo.Summary))
    assert len(la) == len(lb)
    for sa, sb in zip(la, lb, strict=True):
        for field in montecarlo.Summary._fields:
            x, y = getattr(sa, field), getattr(sb, field)
            if x is None or y is None:
                assert x is None and y is None, field
            else:
                np.testing.assert_array_equal(np.asarray(x), np.asarray(y), err_msg=field)


def per_trial(trial, key, indices, *params):
    """Each trial's metrics, from the documented key of trial i:
    fold_in(fold_in(key, i // 2**32), i % 2**32)."""
    idx = np.asarray(list(indices), np.uint64)
    hi = jnp.asarray((idx >> np.uint64(32)).astype(np.uint32))
    lo = jnp.asarray((idx & np.uint64(0xFFFFFFFF)).astype(np.uint32))
    fold = jax.random.fold_in
    keys = jax.vmap(lambda h, low: fold(fold(key, h), low))(hi, lo)
    for j in (0, len(idx) - 1):  # the public helper agrees
        np.testing.assert_array_equal(
            jax.random.key_data(keys[j]),
            jax.random.key_data(montecarlo.trial_key(key, int(idx[j]))),
        )
    return jax.jit(jax.vmap(lambda k: trial(k, *params)))(keys)


# ----------------------------------------------------------------------------- statistics


def test_mean_matches_exact_expected_gap_of_exponential():
    eps = 0.4
    out = montecarlo.run(em_trial, KEY, 200_000, eps, level=0.999, **EM)
    exact = utility.exponential_expected_gap(np.asarray(SCORES), epsilon=eps, sensitivity=1.0)
    gap = out["gap"]
    assert gap.count == 200_000 and gap.level == 0.999
    assert gap.ci_low <= exact <= gap.ci_high, (gap, exact)
    # the exact probability of the best outcome, likewise
    p0 = utility.exponential_probs(np.asarray(SCORES), epsilon=eps, sensitivity=1.0)[0]
    assert out["hit"].ci_low <= p0 <= out["hit"].ci_high
    # and the check can fail: the same interval excludes the gap of a wrong epsilon
    wrong = utility.exponential_expected_gap(
        np.asarray(SCORES), epsilon=0.85 * eps, sensitivity=1.0
    )
    with pytest.raises(AssertionError):
        assert gap.ci_low <= wrong <= gap.ci_high


def test_histogram_matches_exact_law_by_chi_square():
    eps = 0.4
    out = montecarlo.run(em_trial, KEY, 100_000, eps, **EM)
    counts = out["idx"].histogram
    assert counts.dtype == np.int64 and counts.shape == (50,) and counts.sum() == 100_000

    def check(probs):
        keep = probs * counts.sum() > 5
        obs = np.append(counts[keep], counts[~keep].sum())
        exp = np.append(probs[keep], probs[~keep].sum()) * counts.sum()
        assert scipy.stats.chisquare(obs, exp).pvalue > 1e-3

    s = np.asarray(SCORES)
    check(utility.exponential_probs(s, epsilon=eps, sensitivity=1.0))
    with pytest.raises(AssertionError):
        check(utility.exponential_probs(s, epsilon=0.9 * eps, sensitivity=1.0))


def test_moments_std_and_ci_formula():
    out = montecarlo.run(uniform_trial, KEY, 50_000, level=0.95, progress=False)
    x = np.asarray(per_trial(uniform_trial, KEY, range(50_000)), np.float64)
    np.testing.assert_allclose(out.mean, x.mean(), rtol=1e-7)  # float32 block sums
    np.testing.assert_allclose(out.std, x.std(ddof=1), rtol=1e-6)
    np.testing.assert_allclose(out.stderr, x.std(ddof=1) / np.sqrt(x.size), rtol=1e-6)
    z = scipy.stats.norm.ppf(0.975)
    np.testing.assert_allclose(out.ci_high - out.mean, z * out.stderr, rtol=1e-12)
    np.testing.assert_allclose(out.mean - out.ci_low, z * out.stderr, rtol=1e-12)
    assert out.min == x.min() and out.max == x.max()


def test_variance_accurate_for_large_offset():
    def trial(key):
        return 1e4 + jax.random.normal(key)

    out = montecarlo.run(trial, KEY, 20_000, progress=False)
    x = np.asarray(per_trial(trial, KEY, range(20_000)), np.float64)
    np.testing.assert_allclose(out.std, x.std(ddof=1), rtol=1e-6)


# ----------------------------------------------------------------------------- reproducibility


def test_same_result_for_any_batch_size_and_ragged_last_batch():
    runs = [
        montecarlo.run(em_trial, KEY, 10_007, 0.5, batch_size=b, bins=BINS, progress=False)
        for b in (1000, BATCH)
    ]
    for other in runs[1:]:
        assert_same(runs[0], other)


def test_same_key_same_result_and_new_key_differs():
    a = montecarlo.run(em_trial, KEY, 5000, 0.5, **EM)
    b = montecarlo.run(em_trial, jax.random.key(0), 5000, 0.5, **EM)
    c = montecarlo.run(em_trial, jax.random.key(1), 5000, 0.5, **EM)
    assert_same(a, b)
    assert a["u"].mean[0] != c["u"].mean[0]
    legacy = montecarlo.run(em_trial, jax.random.PRNGKey(0), 5000, 0.5, **EM)
    assert legacy["gap"].count == 5000


def test_every_trial_uses_trial_key_and_histogram_is_numpy_histogram():
    n = 777
    edges = np.array([0.0, 0.1, 0.5, 0.9, 0.95])
    out = montecarlo.run(uniform_trial, KEY, n, batch_size=512, bins=edges, progress=False)
    x = np.asarray(per_trial(uniform_trial, KEY, range(n)))
    expected, _ = np.histogram(x.astype(np.float32), edges.astype(np.float32))
    np.testing.assert_array_equal(out.histogram, expected)
    np.testing.assert_array_equal(out.bin_edges, edges)
    assert out.min == x.min() and out.max == x.max()


def test_padding_is_masked_out():
    out = montecarlo.run(uniform_trial, KEY, 1, batch_size=65536, bins=np.linspace(0, 1, 5))
    x = float(uniform_trial(montecarlo.trial_key(KEY, 0)))
    assert out.count == 1 and out.mean == x and out.min == x and out.max == x
    assert out.histogram.sum() == 1 and np.isnan(out.std)


def test_trial_indices_past_two_to_the_32():
    start = 2**32 - 3
    n = 6
    out = montecarlo.run(
        uniform_trial, KEY, n, first_trial=start, batch_size=256, bins=np.linspace(0, 1, 65)
    )
    x = np.asarray(per_trial(uniform_trial, KEY, range(start, start + n)))
    expected, _ = np.histogram(x, np.linspace(0, 1, 65).astype(np.float32))
    np.testing.assert_array_equal(out.histogram, expected)
    assert out.min == x.min() and out.max == x.max()
    keys = {int(jax.random.key_data(montecarlo.trial_key(KEY, i))[0]) for i in (0, 2**32)}
    assert len(keys) == 2  # 2**32 does not wrap around to trial 0


def test_split_runs_cover_the_same_trials():
    whole = montecarlo.run(em_trial, KEY, 10_000, 0.5, **EM)
    first = montecarlo.run(em_trial, KEY, 5800, 0.5, **EM)
    second = montecarlo.run(em_trial, KEY, 4200, 0.5, first_trial=5800, **EM)
    np.testing.assert_array_equal(
        whole["idx"].histogram, first["idx"].histogram + second["idx"].histogram
    )
    assert whole["gap"].max == max(first["gap"].max, second["gap"].max)


# ----------------------------------------------------------------------------- compilation, memory


def test_jitted_once_not_retraced_per_batch_or_per_call():
    @chex.assert_max_traces(n=1)
    def trial(key, eps):
        return jaxdp.permute_and_flip(key, SCORES, epsilon=eps, sensitivity=1.0)

    montecarlo.run(trial, KEY, 20 * 256 + 3, 0.5, batch_size=256, progress=False)  # 21 batches
    montecarlo.run(trial, KEY, 50 * 256, 0.9, batch_size=256, progress=False)  # new eps, new N


def test_memory_does_not_grow_with_num_trials():
    calls = []

    def trial(key):
        calls.append(1)  # counts traces
        return jax.random.normal(key, (4,))

    small = montecarlo.run(trial, KEY, 4096, batch_size=4096, progress=False)
    big = montecarlo.run(trial, KEY, 2**22, batch_size=4096, progress=False)  # 1024 batches
    assert len(calls) == 1  # one executable serves both: its memory does not depend on N
    assert small.count == 4096 and big.count == 2**22
    # the executable's buffers are those of one batch (a few blocks of sums), far below
    # the 64 MiB that the 2**22 x 4 float32 metrics would take
    config = montecarlo._Config(
        jax.sharding.Mesh(np.asarray(jax.devices()), ("trials",)),
        4096 // len(jax.devices()),
        (),
        str(jax.random.key_impl(KEY)),
    )
    step = montecarlo._compiled_step(trial, config)
    args = (jax.random.key_data(KEY), np.uint32(0), np.uint32(0), np.int32(4096), ())
    mem = step.lower(*args).compile().memory_analysis()
    if mem is not None:
        total = mem.temp_size_in_bytes + mem.output_size_in_bytes + mem.argument_size_in_bytes
        assert total < 4 * 2**20, total
    np.testing.assert_array_less(np.abs(big.mean), 5 * big.stderr + 1e-12)


# ----------------------------------------------------------------------------- structure


def test_pytree_structure_names_and_dtypes():
    def trial(key):
        u = jax.random.uniform(key)
        return (u, {"a": {"b": (u > 0.5)}, "n": jnp.int32(3)})

    out = montecarlo.run(trial, KEY, 1000, bins={"1/a/b": 2, "1/n": 5}, progress=False)
    assert isinstance(out, tuple) and isinstance(out[1]["a"]["b"], montecarlo.Summary)
    assert out[1]["n"].mean == 3.0 and out[1]["n"].histogram.tolist() == [0, 0, 0, 1000, 0]
    hits = out[1]["a"]["b"]
    assert hits.histogram.sum() == 1000 and hits.histogram[1] == round(hits.mean * 1000)
    assert isinstance(out[0].mean, np.float64) and out[0].histogram is None


def test_vector_metric_and_nan_propagation():
    def trial(key):
        u = jax.random.uniform(key)
        return jnp.stack([u, jnp.where(u > 0.99, jnp.nan, u)])

    out = montecarlo.run(trial, KEY, 2000, bins=np.linspace(0, 1, 3), progress=False)
    assert out.mean.shape == (2,) and out.histogram.shape == (2, 2)
    assert np.isfinite(out.mean[0]) and np.isnan(out.mean[1]) and np.isnan(out.max[1])
    assert out.histogram[0].sum() == 2000 and out.histogram[1].sum() < 2000  # NaN not counted


def test_progress_bar_and_missing_tqdm(monkeypatch, capsys):
    try:
        import tqdm  # noqa: F401
    except ImportError:
        pass
    else:
        montecarlo.run(uniform_trial, KEY, 1000, progress=True)
        assert "trial" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    with pytest.warns(RuntimeWarning, match="tqdm is not installed"):
        out = montecarlo.run(uniform_trial, KEY, 1000, progress=True)
    assert out.count == 1000
    montecarlo.run(uniform_trial, KEY, 1000)  # auto: silently off


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(trial=None), "trial must be callable"),
        (dict(key=0), "key must be a JAX PRNG key"),
        (dict(key=jax.random.split(KEY, 2)), "use jax.vmap"),
        (dict(num_trials=0), "num_trials must be an int >= 1, got 0"),
        (dict(num_trials=1.5), "num_trials must be an int"),
        (dict(batch_size=0), "batch_size must be an int >= 1"),
        (dict(first_trial=-1), "first_trial must be an int >= 0"),
        (dict(first_trial=2**64), "2\\*\\*64"),
        (dict(level=1.0), "level must be in \\(0, 1\\), got 1.0"),
        (dict(level="high"), "level must be a number"),
        (dict(bins={"u": [1.0, 0.0]}), "strictly increasing"),
        (dict(bins={"u": 0}), ">= 1 categories"),
        (dict(bins={"nope": 3}), "does not return"),
        (dict(devices=[]), "devices must not be empty"),
    ],
)
def test_bad_arguments_raise(kwargs, match):
    args = dict(trial=lambda k: {"u": jax.random.uniform(k)}, key=KEY, num_trials=10)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        montecarlo.run(args.pop("trial"), args.pop("key"), args.pop("num_trials"), **args)


def test_non_numeric_metric_raises():
    with pytest.raises(ValueError, match="must be a real number or array"):
        montecarlo.run(lambda k: k, KEY, 10, progress=False)
    with pytest.raises(ValueError, match="index must be"):
        montecarlo.trial_key(KEY, -1)


# ----------------------------------------------------------------------------- 8 devices

_SHARDED = textwrap.dedent(
    """
    import pickle, sys
    import jax, jax.numpy as jnp, numpy as np
    sys.path.insert(0, sys.argv[2])
    import jaxdp
    from jaxdp import montecarlo
    exec(sys.argv[3])
    assert len(jax.devices()) == 8, jax.devices()
    kw = dict(bins={"idx": 50, "u": np.linspace(0.0, 1.0, 11)}, progress=False)
    out = {
        "8": montecarlo.run(em_trial, jax.random.key(0), 30_001, 0.5, batch_size=8192, **kw),
        "3": montecarlo.run(em_trial, jax.random.key(0), 30_001, 0.5, batch_size=3000,
                            devices=jax.devices()[:3], **kw),
    }
    pickle.dump(out, open(sys.argv[1], "wb"))
    """
)


def test_eight_devices_equal_one_device(tmp_path):
    env = dict(os.environ)
    env["XLA_FLAGS"] = (
        env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
    ).strip()
    env["JAX_PLATFORMS"] = "cpu"
    result = tmp_path / "sharded.pkl"
    proc = subprocess.run(
        [sys.executable, "-c", _SHARDED, str(result), str(REPO), TRIAL_SOURCE],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(result, "rb") as f:
        sharded = pickle.load(f)
    # One CPU device here too: a chunked kernel's draws depend on the backend's plan.
    single = montecarlo.run(em_trial, KEY, 30_001, 0.5, devices=jax.devices("cpu")[:1], **EM)
    assert_same(sharded["8"], single)
    assert_same(sharded["3"], single)


# ----------------------------------------------------------------------------- studies


def test_studies_quick_run_writes_json_and_plot(tmp_path):
    pytest.importorskip("matplotlib")
    from benchmarks import studies

    assert studies.main(["most-common", "--scale", "0.002", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "most_common.json").read_text())
    assert (tmp_path / "most_common.png").stat().st_size > 0
    assert data["trials"] == 2 * 2000 and data["machine"]["backend"] == jax.default_backend()
    assert data["conclusion"]["min_chi_square_pvalue"] > 1e-4


# ----------------------------------------------------------------------------- early errors


def test_wrong_trial_signature_fails_early_naming_the_trial(monkeypatch):
    def two_keys(key, other):  # needs a param that is not passed
        return jax.random.uniform(key)

    def bar(*args, **kwargs):  # the progress bar must not start before the check
        raise AssertionError("progress bar started before the trial was checked")

    monkeypatch.setattr(montecarlo, "_progress_bar", bar)
    with pytest.raises(ValueError, match=r"trial .*two_keys.* failed while tracing: TypeError"):
        montecarlo.run(two_keys, KEY, 10, progress=True)

    def returns_string(key):
        return {"label": "x"}

    with pytest.raises(ValueError, match=r"returns_string.*'x'.*not a valid JAX type"):
        montecarlo.run(returns_string, KEY, 10, progress=True)

    def returns_key(key):
        return {"k": jax.random.split(key)}

    with pytest.raises(ValueError, match=r"returns_key returns metric 'k' of dtype key"):
        montecarlo.run(returns_key, KEY, 10, progress=True)

    def raises_inside(key, eps):
        return jaxdp.exponential(key, SCORES, epsilon=eps, sensitivity=-1.0)

    with pytest.raises(ValueError, match=r"trial .*raises_inside.* sensitivity"):
        montecarlo.run(raises_inside, KEY, 10, 0.5, progress=True)


def test_sizes_out_of_range_raise_value_error():
    n = 2**31 + 5
    with pytest.raises(
        ValueError, match=r"batch_size must be <= 2\*\*30.*got batch_size=2147483653"
    ):
        montecarlo.run(uniform_trial, KEY, n, batch_size=n, progress=False)
    with pytest.raises(ValueError, match="num_trials must be an int"):
        montecarlo.run(uniform_trial, KEY, float(n), progress=False)
    # a huge num_trials with a sane batch is fine (only the first batch is traced here)
    with pytest.raises(ValueError, match="first_trial \\+ num_trials must be <= 2\\*\\*64"):
        montecarlo.run(uniform_trial, KEY, 2**64, first_trial=1, progress=False)


def test_at_scale_study_quick_run(tmp_path):
    pytest.importorskip("matplotlib")
    from benchmarks import studies

    assert studies.main(["at-scale", "--scale", "1e-5", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "at_scale.json").read_text())
    assert (tmp_path / "at_scale.png").stat().st_size > 0
    assert data["trials"] == 10_000 and data["memory"]["host_peak_rss_mib"] > 0
    assert abs(data["gap_z"]) < 4 and data["chi_square_pvalue"] > 1e-4
