#!/usr/bin/python3 -B
"""shell_words_test.py: the scan finds the programs a script runs, and only those, on the shell
constructs that fool a plain regex (quoted parentheses, heredocs, case patterns, wrappers)."""

import sys

import tree_uses

CASES = [
    ('echo "demo: build first (make)"; echo \'(gnuplot)\'', {"": set()}),
    ("x=$(seq 3 | tr a b)\ny=`hostname`", {"": {"seq", "tr", "hostname"}}),
    ("cat > t.c <<'C'\n#include <stdio.h>\nperf record\nC\ngcc t.c", {"": {"cat", "gcc"}, "header": {"stdio.h"}}),
    ("case $h in\n*sw) continue;;\nplain|other) strace -f x;;\nesac", {"": {"strace"}}),
    ("trap 'rm -rf \"$t\"' EXIT", {"": {"rm"}}),
    ("GLOO=1 timeout -k 5 900 ip netns exec h0 iptables -L", {"": {"timeout", "ip", "iptables"}}),
    ('CC=${CC:-cc}\n"$CC" x.c\n"$here/own_tool" y\n./build/bin/x', {"": {"cc"}}),
    ('run() {\n    if "$@" > log; then :; fi\n}\nrun gcc x.c', {"": {"gcc"}}),
    ('run() {\n    name=$1\n    shift\n    "$@"\n}\nrun "a (make)" env A=1 python3 -m pytest x', {"": {"env", "python3"}, "module": {"pytest"}}),
    ("awk '{ print \"(make)\" }' f | sort -u; n=$(( $# + 1 ))", {"": {"awk", "sort"}}),
    ("if ! command -v nvcc >/dev/null 2>&1; then exit 0; fi\nfoo 2>&1 >/dev/null", {"": {"foo"}}),
    ("$SUDO apt-get install x\nSUDO=sudo", {"": {"sudo", "apt-get"}}),
]
MAKEFILE = "BAZEL ?= bazel\nall:\n\t@$(BAZEL) build //...\n\t@for b in $$(cat f); do cp $$b x; done\n\t$(MAKE) -C y\n"
PYTHON = ('import subprocess, sys\nimport numpy as np\nfrom torch import nn\n'
          'subprocess.run([sys.executable, "-m", "pip", "--version"])\nsubprocess.Popen(["gnuplot", "-p"])\n'
          'subprocess.run("tc qdisc show | grep tbf", shell=True)\n')


def found(path, text):
    uses = tree_uses.Uses(set(sys.stdlib_module_names))
    functions = tree_uses.shell_functions({path: text} if not path.endswith(".py") else {})
    if path.endswith(".py"):
        tree_uses._python(uses, path, text, functions)
    else:
        tree_uses._shell(uses, "/nonexistent", path, text, functions)
    return {k: set(v) for k, v in uses.by_kind.items()}


def main():
    failed = 0
    cases = [("t.sh", text, want) for text, want in CASES]
    cases.append(("Makefile", MAKEFILE, {"": {"bazel", "cat", "cp", "make"}}))
    cases.append(("t.py", PYTHON, {"": {"/usr/bin/python3", "gnuplot", "tc", "grep"}, "module": {"pip", "numpy", "torch"}}))
    for path, text, want in cases:
        got = found(path, text)
        for kind, names in want.items():
            k = kind or "command"
            if got[k] != names:
                print(f"FAILED: {path} {text!r}: {k}s {sorted(got[k])}, expected {sorted(names)}")
                failed += 1
    print(f"{len(cases) - failed} of {len(cases)} scripts scanned as expected")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
