#!/usr/bin/env bash
# The GPU checks of one lease of a GPU machine, in one command, from the repository root:
#
#     PYTHONPATH=. bash benchmarks/device_check.sh
#
# Runs, each under its own time limit (seconds; SIGINT first, so pytest still prints
# its summary): the suite's quick mode on the GPU, the suite's S >= 1e8 and
# large-W2 rows (full mode, the GPU targets), where W2 spends its time
# (``benchmarks/w2_probe.py``, with the leaves' block sums three ways), the block
# sums by strided slices and the integer row maximum against ``reduce_window`` and
# ``jnp.max``, and by a product with ones (``tuning --quick --only block_sums --only
# int_max --only dot_block_sums``: ``DOT_BLOCK_SUMS`` is off there, unmeasured; the GPU's rules
# in ``jaxdp/_tuning.py`` came from it, run 4 of
# ``benchmarks/results/gpu-nvidia-h100-80gb-hbm3/``; this re-checks them), one row's
# walk by slices against scalar gathers and one row's small alias table read by
# selects against gathers, and the alias table's prefix sums by integer products
# against ``cumsum`` (``tuning --quick --only block_gather --only alias_select
# --only prefix_sums``: the GPU's ``BLOCK_GATHER_MAX_ROWS`` is the CPU's, its
# ``ALIAS_SELECT_MAX_LOG2`` and ``PREFIX_SUM_BLOCK`` are off, all unmeasured
# there), and the test suite on the GPU: at most 585 s in all, so a
# 15-minute lease needs no second start. (The tuning grid and the crossover,
# ``tuning --quick`` and ``crossover --quick``, and the tabulated noisy max's cost
# model, ``tuning --quick --only costs``, ran in earlier leases.) Logs and
# results go to $R (default /tmp/jaxdp-device) and, packed after every step, to
# $OUT/device.tgz when OUT is set, so a lease cut short still returns what
# finished. Limits can be scaled with SCALE (e.g. SCALE=2 for twice as long).
set -u
export PYTHONPATH="${PYTHONPATH:-.}" PYTHONUNBUFFERED=1
R="${R:-/tmp/jaxdp-device}"
SCALE="${SCALE:-1}"
mkdir -p "$R"
PY="${PY:-python3}"

pack() { if [ -n "${OUT:-}" ]; then tar czf "$OUT/device.tgz" -C "$R" .; fi; }

step() {  # step NAME SECONDS COMMAND...
  local name=$1 secs=$(( $2 * SCALE )) t0=$SECONDS rc
  shift 2
  echo "=== $name: limit ${secs} s, $(date -u +%T)"
  timeout -s INT -k 20 "$secs" "$@" >"$R/$name.log" 2>&1
  rc=$?
  echo "=== $name: exit $rc after $(( SECONDS - t0 )) s"
  echo "$name $rc $(( SECONDS - t0 ))" >>"$R/steps.txt"
  pack
}

{
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm \
    --format=csv 2>&1
  nproc
  $PY -c "import jax, jaxlib, numpy, scipy, chex; print('jax', jax.__version__, 'jaxlib', \
jaxlib.__version__, 'numpy', numpy.__version__, 'scipy', scipy.__version__, 'chex', \
chex.__version__); print(jax.devices())" 2>&1
} >"$R/env.txt"
cat "$R/env.txt"
pack

step suite_quick 140 $PY -m benchmarks --quick --backend gpu --no-progress --out "$R/results"
step suite_gpu_targets 35 $PY -m benchmarks --backend gpu --no-progress --no-plots \
  --out "$R/results-targets" \
  --only '^exponential_auto_(n1e1_s1e8|n1e3_s1e8|n1e5_s1e8|n1e3_b1e5|n1e5_b1e4)_f32$'
step w2_probe 35 $PY benchmarks/w2_probe.py "$R"
step block_sums 100 $PY -m benchmarks tuning --quick --only block_sums --only int_max \
  --only dot_block_sums --out "$R/results-block-sums"
step block_gather 60 $PY -m benchmarks tuning --quick --only block_gather \
  --only alias_select --only prefix_sums --out "$R/results-block-gather"
# The tests last: each worker is its own process on the one GPU (no preallocation).
XLA_PYTHON_CLIENT_PREALLOCATE=false step pytest 215 $PY -m pytest -q -p no:cacheprovider \
  -n 16 --durations=20 tests

echo
echo "=== steps (name, exit, seconds)"
cat "$R/steps.txt"
for f in suite_quick suite_gpu_targets; do
  echo "=== $f: targets"
  grep -E "met|missed|reported|not measured" "$R/$f.log" | tail -n 40
done
echo "=== pytest"
grep -E "passed|failed|FAILED|ERROR" "$R/pytest.log" | tail -n 40
echo "=== w2_probe"
grep -E "candidates/s" "$R/w2_probe.log"
echo "=== block sums, integer maximum"
grep -E "^\|" "$R/block_sums.log" | tail -n 12
echo "=== block gather, alias select"
grep -E "^\|" "$R/block_gather.log" | tail -n 7
