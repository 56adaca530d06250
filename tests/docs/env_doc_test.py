#!/usr/bin/python3 -B
"""env_doc_test.py [ROOT]: docs/environment.md lists exactly the PCCL_* environment variables that
the library, pccl-master, the Python package and the build tools read.

A read is a string literal naming the variable ("PCCL_X") in C/CUDA code (comments ignored) or in
Python, or a $PCCL_X / ${PCCL_X in a shell script or makefile of tools/. That catches getenv("..."),
ccoip_env_num("...", d), the knob tables that pass a name to getenv, and os.environ.get("...").
A getenv whose argument is not a literal hides the name: it is allowed only in the wrappers listed
in WRAPPERS, whose callers pass literals (and so are caught above). Tests' and benchmarks' own
variables are not the library's: tests/, bench/ and python/tests are not scanned.
Run by hand: /usr/bin/python3 tests/docs/env_doc_test.py."""

import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "layout"))
import srctree  # noqa: E402

DOC = "docs/environment.md"
PYTHON = ["python/pccl", "python/setup.py"]
TOOLS = ["tools"]

# (file, argument) of the getenv calls that take a name from their caller.
WRAPPERS = {
    ("ccoip/peer/ccoip_env.c", "name"),       # ccoip_env_num(name, def)
    ("ccoip/peer/ccoip_device.c", "name"),    # kib_env(name, ...): the copy sizes' A/B knobs
    ("ccoip/peer/ccoip_stripe.c", "k->name"),  # the A/B knobs' table
    ("profiler/pprof_trace.c", "name"),       # env_u32(name, def)
}

NAME = r"PCCL_[A-Z0-9_]+"


def c_reads(top, problems):
    found = {}
    for rel in srctree.library_files(top):
        code = srctree.strip_c_comments(srctree.read(top, rel))
        for m in re.finditer(r'"(' + NAME + r')"', code):
            found.setdefault(m.group(1), rel)
        for m in re.finditer(r"\bgetenv\s*\(\s*([^)\"]*)\)", code):
            if (rel, m.group(1).strip()) not in WRAPPERS:
                problems.append(f"{rel}: getenv({m.group(1).strip()}) takes a name that is not a literal; "
                                f"make its callers pass literals and add it to WRAPPERS")
    return found


def python_reads(top, problems):
    found = {}
    for rel in srctree.files_under(top, PYTHON, (".py",)):
        text = srctree.read(top, rel)
        for m in re.finditer(r"""["'](""" + NAME + r""")["']""", text):
            found.setdefault(m.group(1), rel)
        for m in re.finditer(r"\b(?:getenv\(|environ\.get\(|environ\[)\s*([^\s'\"][^)\],]*)", text):
            problems.append(f"{rel}: an environment read whose name is not a literal: {m.group(0)}")
    return found


def shell_reads(top):
    found = {}
    for rel in srctree.files_under(top, TOOLS, (".sh", ".mk", "Makefile")):
        for m in re.finditer(r"\$\{?(" + NAME + r")", srctree.read(top, rel)):
            found.setdefault(m.group(1), rel)
    return found


def documented(top):
    rows = set()
    for line in srctree.read(top, DOC).splitlines():
        m = re.match(r"\|\s*`(" + NAME + r")`\s*\|", line)
        if m:
            rows.add(m.group(1))
    return rows


def main():
    top = srctree.root()
    problems = []
    read = {}
    for part in (c_reads(top, problems), python_reads(top, problems), shell_reads(top)):
        for k, v in part.items():
            read.setdefault(k, v)
    doc = documented(top)
    # Canaries: reads of each kind that must be found, so that a broken scan cannot pass.
    for name in ("PCCL_LOG_LEVEL", "PCCL_CONNECT_TIMEOUT_MS", "PCCL_STRIPE_WINDOW", "PCCL_LIBRARY"):
        if name not in read:
            problems.append(f"the scan no longer finds {name} (a canary): the scan is broken")
    for name in sorted(set(read) - doc):
        problems.append(f"{read[name]} reads {name}, which {DOC} does not list")
    for name in sorted(doc - set(read)):
        problems.append(f"{DOC} lists {name}, which nothing reads")
    for p in problems:
        print("FAIL", p)
    print(f"{len(read)} variables read, {len(doc)} documented, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
