#!/usr/bin/env bash
# The GPU checks of one lease of a GPU machine, in one command, from the repository root:
#
#     PYTHONPATH=. bash benchmarks/device_check.sh
#
# Runs, each under its own time limit (seconds; SIGINT first, so pytest still prints
# its summary): the suite's quick mode on the GPU, the test suite on the GPU, the
# suite's S >= 1e8 and large-W2 rows (full mode, the GPU targets), the tuning grid
# and the Gumbel/inverse-CDF crossover. Logs and results go to $R (default
# /tmp/jaxdp-device) and, packed after every step, to $OUT/device.tgz when OUT is
# set, so a lease cut short still returns what finished. Limits can be scaled with
# SCALE (e.g. SCALE=2 for twice as long).
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

step suite_quick 180 $PY -m benchmarks --quick --backend gpu --no-progress --out "$R/results"
XLA_PYTHON_CLIENT_PREALLOCATE=false step pytest 170 $PY -m pytest -q -p no:cacheprovider \
  tests/test_descent.py tests/test_alias.py tests/test_hybrid.py tests/test_deep_hybrid.py \
  tests/test_exponential.py tests/test_noisy_max.py tests/test_tabulated.py \
  tests/test_precision_noise.py tests/test_categorical.py tests/test_kernels.py tests
step suite_gpu_targets 80 $PY -m benchmarks --backend gpu --no-progress --no-plots \
  --out "$R/results-targets" \
  --only '^exponential_auto_(n1e1_s1e8|n1e3_s1e8|n1e5_s1e8|n1e3_b1e5|n1e5_b1e4)_f32$'
step tuning 90 $PY -m benchmarks tuning --quick --out "$R/results"
step crossover 40 $PY -m benchmarks crossover --quick --out "$R/results"

echo
echo "=== steps (name, exit, seconds)"
cat "$R/steps.txt"
for f in suite_quick suite_gpu_targets; do
  echo "=== $f: targets"
  grep -E "met|missed|reported|not measured" "$R/$f.log" | tail -n 40
done
echo "=== pytest"
grep -E "passed|failed|FAILED|ERROR" "$R/pytest.log" | tail -n 40
echo "=== tuning"
grep -E "^\|" "$R/tuning.log" | tail -n 30
echo "=== crossover"
grep -E "^\|" "$R/crossover.log" | tail -n 20
