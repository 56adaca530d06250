#!/usr/bin/python3
"""count_tests.py BEP_JSON: prints failed test targets, then "N passed, N failed (W under wine)".

Counts each test target once from Bazel's build event stream: PASSED (also cached) is a pass;
FAILED, TIMEOUT, FLAKY, or a test target that did not build is a failure."""
import json
import sys

passed, failed = set(), {}
tests = set()
built_bad = set()
with open(sys.argv[1]) as f:
    for line in f:
        ev = json.loads(line)
        eid = ev.get("id", {})
        if "testSummary" in eid:
            label = eid["testSummary"]["label"]
            status = ev.get("testSummary", {}).get("overallStatus", "NO_STATUS")
            (passed.add(label) if status == "PASSED" else failed.__setitem__(label, status))
        elif "targetCompleted" in eid:
            label = eid["targetCompleted"]["label"]
            completed = ev.get("completed", {})
            if completed.get("testTimeoutSeconds") is not None or label in tests:
                tests.add(label)
            if not completed.get("success", False) and ev.get("aborted") is None:
                built_bad.add(label)
        elif "targetConfigured" in eid:
            kind = ev.get("configured", {}).get("targetKind", "")
            if kind.endswith("_test rule"):
                tests.add(eid["targetConfigured"]["label"])
        if "aborted" in ev and "targetCompleted" in eid:
            built_bad.add(eid["targetCompleted"]["label"])

for label in sorted(tests & built_bad):
    if label not in passed and label not in failed:
        failed[label] = "DID_NOT_BUILD"
for label, status in sorted(failed.items()):
    print(f"FAILED {label}: {status}")
# Windows programs under wine: tests/win/ and threadpark's win32 test (docs/platforms.md).
wine = [x for x in passed | set(failed) if x.startswith("//tests/win:") or x.endswith("_win32_test")]
print(f"{len(passed)} passed, {len(failed)} failed ({len(wine)} under wine)")
sys.exit(1 if failed or not passed else 0)
