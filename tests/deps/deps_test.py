#!/usr/bin/python3 -B
"""deps_test.py [ROOT]: every system header the tree includes, every Python module it imports and
every program its scripts run comes from a Debian package that tools/deps.sh installs.

A fresh Debian 12 box once failed `make demo` because deps.sh lacked libnetfilter-queue-dev; this
test makes that omission fail here instead. It maps each use to its package with dpkg -S and fails
naming the file, the item and the package, or the item that this machine cannot map at all.
Run by hand from anywhere: /usr/bin/python3 tests/deps/deps_test.py. See docs/dependencies.md."""

import fnmatch
import os
import re
import sys
import time

import debian
import tree_uses

# What counts as installed by deps.sh, besides the packages its PACKAGES list names:
#   - what a listed package Depends or Pre-Depends on directly: apt installs it along, and a
#     package keeps its direct dependencies from release to release far more often than deeper ones;
#   - the packages of INDIRECT, each with the chain through which a listed package pulls it in;
#     every link is checked against dpkg's Depends, so a stale chain fails instead of hiding a gap;
#   - Essential and Priority: required packages: every Debian system has them.
# A deeper dependency that is not in INDIRECT does not count: name the package in deps.sh.
INDIRECT = {
    "libc6-dev": ["g++", "g++-12", "libstdc++-12-dev", "libc6-dev"],
    "linux-libc-dev": ["g++", "g++-12", "libstdc++-12-dev", "libc6-dev", "linux-libc-dev"],
    "libgcc-12-dev": ["gcc", "gcc-12", "libgcc-12-dev"],
    "libstdc++-12-dev": ["g++", "g++-12", "libstdc++-12-dev"],
    "binutils": ["gcc", "gcc-12", "binutils"],                        # ar, nm
    "python3-minimal": ["python3-numpy", "python3", "python3-minimal"],  # /usr/bin/python3
    "gcc-mingw-w64-x86-64-win32": ["mingw-w64", "gcc-mingw-w64", "gcc-mingw-w64-x86-64",
                                   "gcc-mingw-w64-x86-64-win32"],     # x86_64-w64-mingw32-gcc
    "libwine": ["wine", "wine64", "libwine"],                         # wineserver
}

# Uses that no Debian package provides, or that deps.sh cannot provide, each with the reason.
# (kind, name pattern): reason. A pattern is matched with fnmatch.
ALLOWED = {
    ("header", "windows.h"): "the Win32 API: only mingw-w64's cross compiler (deps.sh installs mingw-w64) "
                             "sees it, for threadpark_win32.c and tt_thread.h's _WIN32 branch",
    ("header", "winsock2.h"): "Winsock: only mingw-w64's cross compiler sees it, in ccoip/net/ccoip_sys.h's _WIN32 "
                              "branch (make windows)",
    ("header", "ws2tcpip.h"): "Winsock: only mingw-w64's cross compiler sees it, in ccoip/net/ccoip_sys.h's _WIN32 "
                              "branch (make windows)",
    ("header", "cuda_runtime.h"): "the CUDA toolkit (NVIDIA's installer, not Debian): nvcc only, optional",
    ("header", "cub/*"): "the CUDA toolkit (NVIDIA's installer, not Debian): nvcc only, optional",
    ("command", "nvidia-smi"): "the NVIDIA driver's tool, on GPU machines; tools/gpu_run_*.sh go on without it",
    ("command", "sudo"): "deps.sh runs it only when not root, to install the rest: it cannot install itself",
}
# Files found here belong to a toolchain that is not a Debian package.
TOOLCHAIN_DIRS = {re.compile(r"^/usr/local/cuda(-[\d.]+)?/"): "the CUDA toolkit (NVIDIA's installer, "
                  "not Debian): optional, the CUDA flavour is built only where /usr/local/cuda/bin/nvcc is"}
# Files that only another platform's compiler sees: a header missing here is that platform's.
PLATFORM_FILES = {"*_win32.*": "the Windows SDK of mingw-w64", "*_darwin.*": "the macOS SDK"}

# Known uses that must be found and mapped, and whose package, once dropped from the list, must be
# reported: they keep the check from passing because it found nothing.
CANARIES = [
    ("header", "uv.h", "libuv1-dev"),
    ("header", "xxhash.h", "libxxhash-dev"),
    ("header", "libnetfilter_queue/libnetfilter_queue.h", "libnetfilter-queue-dev"),
    ("module", "torch", "python3-torch"),
    ("command", "ip", "iproute2"),
]

VERB = {"header": "includes", "module": "imports", "command": "runs"}


class Item:
    """One header, module or program, where the tree uses it, and what this machine says of it."""

    def __init__(self, kind, name, where):
        self.kind, self.name, self.where = kind, name, where
        self.path = None        # the file found for it
        self.packages = set()   # the packages that own that file
        self.toolchain = None   # the reason, when a non-Debian toolchain provides it

    def site(self):
        more = len(self.where) - 1
        return self.where[0] + (f" (and {more} more)" if more else "")

    def what(self):
        shown = self.name
        if self.kind == "command" and self.path and self.path != self.name:
            shown += f" ({self.path})"
        return f"{self.site()} {VERB[self.kind]} {shown}"


def source_root():
    if len(sys.argv) > 1:
        return os.path.realpath(sys.argv[1])
    # Under bazel test, the runfile of //tools:deps.sh links into the real source tree.
    srcdir = os.environ.get("TEST_SRCDIR")
    if srcdir:
        rf = os.path.join(srcdir, os.environ.get("TEST_WORKSPACE", "libpccl"), "tools", "deps.sh")
        if os.path.exists(rf):
            return os.path.dirname(os.path.dirname(os.path.realpath(rf)))
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))


def header_language(where):
    ext = os.path.splitext(where.rsplit(":", 1)[0])[1]
    return "cuda" if ext in (".cu", ".cuh") else "c++" if ext in tree_uses.CXX_EXTS else "c"


def locate(uses):
    """Items with the file each one is found as. A header gets one item per language that includes
    it: <stdlib.h> is libc6-dev's in C and libstdc++'s in C++."""
    items = []
    c, cxx = debian.include_dirs("c"), debian.include_dirs("c++")
    dirs = {"c": c, "c++": cxx, "cuda": debian.CUDA_DIRS + cxx}
    for kind, names in uses.by_kind.items():
        for name, where in sorted(names.items()):
            if kind == "header":
                for lang in ("c", "c++", "cuda"):
                    sites = [w for w in where if header_language(w) == lang]
                    if sites:
                        it = Item(kind, name, sites)
                        it.path = debian.find_header(name, dirs[lang])
                        items.append(it)
                continue
            it = Item(kind, name, where)
            it.path = debian.find_module(name) if kind == "module" else debian.find_program(name)
            items.append(it)
    return items


def map_owners(items):
    paths = {it: debian.candidates(it.path) for it in items if it.path}
    owners = debian.owners(p for ps in paths.values() for p in ps)
    for it in items:
        # A program named by its absolute path belongs to its toolchain even where it is missing.
        for p in paths.get(it, []) + ([it.name] if it.name.startswith("/") else []):
            for rx, reason in TOOLCHAIN_DIRS.items():
                if rx.match(p):
                    it.toolchain = reason
            if p in owners and not it.packages:
                it.packages = owners[p]


def brought_by(listed, pkgs):
    """listed package -> the packages that count as installed with it (see the rule at the top);
    and the problems with INDIRECT chains, as messages."""
    brings, problems = {}, []
    for name in listed:
        brings[name] = {name} | (pkgs[name].depends if name in pkgs else set())
    for target, chain in INDIRECT.items():
        if chain[0] not in listed:
            continue
        broken = [f"{a} -> {b}" for a, b in zip(chain, chain[1:]) if a not in pkgs or b not in pkgs[a].depends]
        if broken:
            problems.append(f"INDIRECT[{target!r}]: {' -> '.join(chain)} does not hold on this machine "
                            f"(no {', '.join(broken)} in dpkg's Depends): fix the chain or list {target} in deps.sh")
        else:
            brings[chain[0]].add(target)
    # A package that provides a virtual name that a listed package depends on counts as that name.
    for name, names in brings.items():
        names |= {p.name for p in pkgs.values() if p.provides & names}
    return brings, problems


def accepted_packages(listed, pkgs):
    """The packages that count as installed by deps.sh, and the problems with INDIRECT chains."""
    brings, problems = brought_by(listed, pkgs)
    ok = set().union(*brings.values())
    ok |= {p.name for p in pkgs.values() if p.essential or p.priority == "required"}
    return ok, problems


def allowed(it):
    for (kind, pattern), reason in ALLOWED.items():
        if kind == it.kind and fnmatch.fnmatchcase(it.name, pattern):
            return reason
    if it.kind == "header" and it.path is None:
        files = [w.rsplit(":", 1)[0] for w in it.where]
        for pattern, reason in PLATFORM_FILES.items():
            if all(fnmatch.fnmatchcase(os.path.basename(f), pattern) for f in files):
                return reason
    return None


def judge(items, ok):
    """(failures, allowed items) for the accepted package set ok."""
    failures, let_pass = [], []
    for it in items:
        if it.toolchain:
            let_pass.append((it, it.toolchain))
        elif it.packages & ok:
            continue
        elif allowed(it):
            let_pass.append((it, allowed(it)))
        elif it.packages:
            pkgs = ", ".join(sorted(it.packages))
            failures.append(f"{it.what()} from {pkgs}, which tools/deps.sh does not install")
        elif it.path:
            failures.append(f"{it.what()}, found at {it.path}, which no Debian package owns: a fresh box will "
                            f"lack it; install it from a Debian package named in tools/deps.sh")
        else:
            failures.append(f"{it.what()}, which is not installed on this machine, so its package is unknown: "
                            f"install it, add its package to tools/deps.sh, and run this again "
                            f"(or list it in ALLOWED in tests/deps/deps_test.py with the reason)")
    return failures, let_pass


def check_canaries(items, listed, pkgs):
    problems = []
    for kind, name, package in CANARIES:
        found = [it for it in items if (it.kind, it.name) == (kind, name)]
        it = next((x for x in found if package in x.packages), found[0] if found else None)
        if it is None:
            problems.append(f"canary: the scan found no {kind} {name}: the tree stopped using it (update "
                            f"CANARIES) or the scan is broken")
            continue
        if package not in it.packages:
            problems.append(f"canary: {kind} {name} maps to {sorted(it.packages) or 'nothing'}, not {package}")
            continue
        without = [p for p in listed if p != package]
        failures, _ = judge([it], accepted_packages(without, pkgs)[0])
        if not any(package in f for f in failures):
            problems.append(f"canary: with {package} dropped from deps.sh the check does not report {name}")
    return problems


def main():
    t0 = time.monotonic()
    root = source_root()
    with open(os.path.join(root, "tools", "deps.sh"), encoding="utf-8") as f:
        listed = debian.deps_sh_packages(f.read())
    uses = tree_uses.scan(root)
    items = locate(uses)
    map_owners(items)
    pkgs = debian.installed_packages()
    ok, problems = accepted_packages(listed, pkgs)
    failures, let_pass = judge(items, ok)
    problems += check_canaries(items, listed, pkgs)

    print(f"deps: tree {root}; tools/deps.sh lists {len(listed)} packages")
    print(f"deps: scanned {uses.files['c']} C/C++/CUDA files, {uses.files['python']} Python files, "
          f"{uses.files['shell']} shell scripts and Makefiles")
    counts = {k: len({it.name for it in items if it.kind == k}) for k in VERB}
    print(f"deps: found {counts['header']} system headers, {counts['module']} Python modules, "
          f"{counts['command']} programs")
    by_package = {}
    for it in items:
        for p in sorted(it.packages & ok)[:1]:
            by_package.setdefault(p, []).append(it.name)
    for p, names in sorted(by_package.items()):
        shown = ", ".join(names[:6]) + (f", ... ({len(names)} in all)" if len(names) > 6 else "")
        print(f"  {p}: {shown}")
    for it, reason in let_pass:
        print(f"  allowed: {it.kind} {it.name}: {reason}")
    brings, _ = brought_by(listed, pkgs)
    unused = [p for p in listed if not any(it.packages & brings[p] for it in items)]
    if unused:
        print(f"deps: listed with no use found by the scan (fine when the use is indirect): {' '.join(unused)}")
    missing_here = [p for p in listed if p not in pkgs]
    if missing_here:
        print(f"deps: listed but not installed on this machine: {' '.join(missing_here)}")
    for msg in failures + problems:
        print(f"FAILED: {msg}")
    print(f"deps: {len(failures) + len(problems)} problems, {time.monotonic() - t0:.1f} s")
    return 1 if failures or problems else 0


if __name__ == "__main__":
    sys.exit(main())
