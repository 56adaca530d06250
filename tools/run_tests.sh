#!/bin/sh
# run_tests.sh [BAZEL_FLAGS...]: runs every Bazel test and ends with the line "N passed, N failed".
# Exit status is non-zero when anything failed or did not build.
set -u
mkdir -p build
bep=build/test_events.json
rm -f "$bep"
bazel test //... --build_event_json_file="$bep" --keep_going "$@"
status=$?
/usr/bin/python3 tools/count_tests.py "$bep"
counted=$?
[ $status -eq 0 ] && [ $counted -eq 0 ]
