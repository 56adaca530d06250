#!/bin/sh
# Runs python/tests with /usr/bin/python3 against the runfiles' libpccl.so and pccl-master.
# Under `bazel test` it finds them in the runfiles tree; run by hand from the repository root it
# uses build/ (after `make build`).
set -eu
if [ -n "${TEST_SRCDIR:-}" ]; then
    root=$TEST_SRCDIR/$TEST_WORKSPACE
    export PCCL_LIBRARY="$root/libpccl.so"
    export PCCL_MASTER_BINARY="$root/ccoip/master/pccl-master"
    export HOME="${HOME:-$TEST_TMPDIR}"
else
    root=$(cd "$(dirname "$0")/.." && pwd)
fi
cd "$root"
export PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
# PCCL_PYTEST_PATHS: what to collect instead of the whole python/tests (a target of its own).
exec /usr/bin/python3 -m pytest -q -rs -p no:cacheprovider ${PCCL_PYTEST_PATHS:-python/tests} "$@"
