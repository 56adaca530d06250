"""debian.py: what this Debian machine knows: installed packages and their Depends, which package owns
a file (dpkg -S, one call for all paths), where a header, a Python module or a program lives."""

import importlib.machinery
import os
import re
import subprocess
import sys

# Where a program is looked for: Debian's folders before /usr/local, then the CUDA toolkit's.
PROGRAM_DIRS = ["/usr/sbin", "/usr/bin", "/sbin", "/bin", "/usr/local/sbin", "/usr/local/bin",
                "/usr/local/cuda/bin"]
# Debian 12 gcc/g++'s search lists, for a machine where the compiler cannot be asked.
C_DIRS = ["/usr/lib/gcc/x86_64-linux-gnu/12/include", "/usr/local/include",
          "/usr/include/x86_64-linux-gnu", "/usr/include"]
CXX_DIRS = ["/usr/include/c++/12", "/usr/include/x86_64-linux-gnu/c++/12", "/usr/include/c++/12/backward"] + C_DIRS
# nvcc's own folders come first for .cu files (CUDA 13 keeps cub/thrust under include/cccl).
CUDA_DIRS = ["/usr/local/cuda/include", "/usr/local/cuda/include/cccl"]


class Package:
    def __init__(self, name, essential, priority, depends, provides):
        self.name, self.essential, self.priority = name, essential, priority
        self.depends = depends      # every package name in Depends and Pre-Depends, alternatives too
        self.provides = provides


def _names(field):
    """Package names of a Depends-style field: versions, architectures and '|' dropped."""
    out = set()
    for part in re.split(r"[,|]", field):
        name = part.strip().split(" ")[0].split(":")[0]
        if name:
            out.add(name)
    return out


def installed_packages():
    """name -> Package, for every installed package (one dpkg-query call)."""
    fmt = "${Package}\t${db:Status-Abbrev}\t${Essential}\t${Priority}\t${Depends}\t${Pre-Depends}\t${Provides}\n"
    out = subprocess.run(["dpkg-query", "-W", "-f", fmt], capture_output=True, text=True, check=True).stdout
    pkgs = {}
    for line in out.splitlines():
        name, status, essential, priority, dep, predep, provides = (line.split("\t") + [""] * 7)[:7]
        if status.startswith("ii"):
            pkgs[name] = Package(name, essential == "yes", priority, _names(dep) | _names(predep), _names(provides))
    return pkgs


def owners(paths):
    """path -> set of owning packages, for the paths that dpkg knows (one dpkg-query -S call)."""
    paths = sorted(set(paths))
    if not paths:
        return {}
    r = subprocess.run(["dpkg-query", "-S"] + paths, capture_output=True, text=True)
    found = {}
    for line in r.stdout.splitlines():
        if line.startswith("diversion by") or ": /" not in line:
            continue
        pkgs, path = line.split(": /", 1)
        found.setdefault("/" + path, set()).update(p.strip().split(":")[0] for p in pkgs.split(","))
    return found


def usr_twin(path):
    """/usr/bin/x <-> /bin/x: with merged /usr both exist, dpkg knows only the one a package ships."""
    for a, b in (("/usr/bin/", "/bin/"), ("/usr/sbin/", "/sbin/"), ("/usr/lib/", "/lib/")):
        if path.startswith(a):
            return b + path[len(a):]
        if path.startswith(b):
            return a + path[len(b):]
    return None


def candidates(path):
    """The names under which dpkg may know a file: as found, its /usr twin, the end of its
    symlinks (alternatives), that one's twin."""
    out = [path, usr_twin(path), os.path.realpath(path)]
    out.append(usr_twin(out[-1]))
    return [p for i, p in enumerate(out) if p and p not in out[:i]]


def include_dirs(language):
    """The compiler's <...> search list for 'c' or 'c++' (gcc -v), or Debian 12's defaults."""
    compiler = {"c": "gcc", "c++": "g++"}[language]
    try:
        r = subprocess.run([compiler, "-x" + language, "-E", "-v", "-"], input="", capture_output=True,
                           text=True, timeout=30)
        m = re.search(r"#include <\.\.\.> search starts here:\n(.*?)End of search list", r.stderr, re.S)
        if m:
            return [os.path.normpath(d.strip()) for d in m.group(1).splitlines() if d.strip()]
    except (OSError, subprocess.SubprocessError):
        pass
    return C_DIRS if language == "c" else CXX_DIRS


def find_header(name, dirs):
    for d in dirs:
        p = os.path.join(d, name)
        if os.path.isfile(p):
            return p
    return None


def find_module(name):
    """The file (or package folder) that Debian's python3 imports for a top-level module name, with
    Debian's own folders searched before /usr/local and the user's site (which a fresh box lacks)."""
    def rank(p):
        return 1 if p.startswith("/usr/local") or p.startswith(os.path.expanduser("~")) else 0
    path = sorted((p for p in sys.path if p and os.path.isabs(p) and p != sys.path[0]), key=rank)
    try:
        spec = importlib.machinery.PathFinder.find_spec(name, path)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return None
    if spec.origin and os.path.isabs(spec.origin):
        return spec.origin
    locations = list(spec.submodule_search_locations or [])
    return locations[0] if locations else None


def find_program(name):
    if name.startswith("/"):
        return name if os.path.exists(name) else None
    for d in PROGRAM_DIRS:
        p = os.path.join(d, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def deps_sh_packages(text):
    """The packages of deps.sh's PACKAGES="..." (the list it installs when given no arguments)."""
    m = re.search(r'^PACKAGES="([^"]*)"', text, re.M)
    if not m:
        raise ValueError('tools/deps.sh has no PACKAGES="..." list')
    return m.group(1).split()
