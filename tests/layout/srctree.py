"""srctree.py: the library's source files as text, for the tests that read the tree rather than
build it (tests/layout, tests/docs).

Under `bazel test` these tests see the tree through runfiles that link into it (spawn strategy
local), so the root is found from this file's real path; a path given on the command line wins."""

import os
import re
import sys

# The library's folders, the public headers included. Tests, benchmarks, examples, tools and the
# Python package are not the library.
LIBRARY_DIRS = [
    "include", "log", "hash", "threadpark", "reduce", "profiler", "fingerprint", "cuda",
    "ccoip/wire", "ccoip/net", "ccoip/peer", "ccoip/master", "ccoip/api",
]
C_EXTS = (".c", ".h", ".cu", ".cuh")


def root():
    if len(sys.argv) > 1:
        return os.path.realpath(sys.argv[1])
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))


def files_under(top, rel_dirs, exts):
    """Paths relative to top of the files under rel_dirs (recursively) ending in one of exts."""
    out = []
    for d in rel_dirs:
        base = os.path.join(top, d)
        if os.path.isfile(base):
            out.append(d)
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(n for n in dirnames if not n.startswith("."))
            for n in filenames:
                if n.endswith(exts):
                    out.append(os.path.relpath(os.path.join(dirpath, n), top))
    return sorted(set(out))


def library_files(top):
    """The library's C and CUDA sources and headers; ccoip/ lists each role folder itself."""
    return [f for f in files_under(top, LIBRARY_DIRS, C_EXTS) if os.path.dirname(f) in LIBRARY_DIRS]


def read(top, rel):
    with open(os.path.join(top, rel), encoding="utf-8", errors="replace") as f:
        return f.read()


_C_TOKENS = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def strip_c_comments(text):
    """C text without its comments (newlines kept, so line numbers hold); strings stay."""
    def repl(m):
        s = m.group(0)
        if s.startswith("/"):
            return "\n" * s.count("\n") if s.startswith("/*") else ""
        return s
    return _C_TOKENS.sub(repl, text)


def strip_c_comments_and_strings(text):
    """C text without comments and with every string and character literal emptied."""
    def repl(m):
        s = m.group(0)
        if s.startswith("/"):
            return "\n" * s.count("\n") if s.startswith("/*") else ""
        return s[0] + s[0]
    return _C_TOKENS.sub(repl, text)
