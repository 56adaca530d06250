#!/usr/bin/python3 -B
"""include_order_test.py [ROOT]: calls point one way in the library, between folders and between
files (issue 31). Reads the library's sources as text (srctree.LIBRARY_DIRS; tests, benchmarks
and tools are not the library) and fails on:

1. A folder reaching up. Every `#include "..."` and every use of a function or global defined in
   another folder must point to a folder of a lower rank in FOLDER_ORDER (or its own). Folders of
   one rank are siblings and must not reach each other. The programs (`*_main.c`: pccl-master,
   pccl-fingerprint) sit above everything: they may call the public API.
2. A circle between files. The graph's nodes are *units*: a .c (or .cu) file together with its
   header of the same name, and the per-platform files (`*_posix.c`, `_linux`, `_darwin`,
   `_win32`, `_none`, `_cuda`) of the module whose header declares what they define
   (`threadpark_linux.c` for threadpark.h, `ccoip_aead_posix.c` for ccoip_auth.h). A header that
   no such file implements (`ccoip_peer_int.h`, `reduce.h`) is an interface, not a unit.
   Unit U -> unit V when a file of U includes a header of V ("uses V's header"), or when a file
   of U uses a function or global that V defines and that a header U includes (also through
   other headers) declares ("V is the .c behind an included header").
   Every strongly connected set of two or more units is a circle.

KNOWN_CIRCLES lists, as exact sets, the circles that existed when this test was written; each
must be found exactly, so a new circle fails, and a listed one that shrank or went fails too
until its entry is updated: the list only shrinks, to empty.
Run by hand: /usr/bin/python3 tests/layout/include_order_test.py."""

import collections
import os
import re
import sys

import srctree

# Lowest first. Each rank may use the ranks below it; folders of one rank are siblings.
FOLDER_ORDER = [
    ["include", "log"],      # the public headers (declarations only) and the one-line log
    ["hash", "threadpark"],  # XXH3 / SimpleHash; park and wake on a word
    ["reduce", "profiler"],  # kernels, quantization, the ring; the profiler plugin loader
    ["fingerprint"],         # the determinism fingerprint (uses reduce's half-float conversions)
    ["cuda"],                # the CUDA table and kernels (the fingerprint's input generators)
    ["ccoip/wire"],          # packets and their codec, pure
    ["ccoip/net"],           # sockets, listeners, the handshake, shared-memory pipes
    ["ccoip/peer", "ccoip/master"],
    ["ccoip/api"],           # the public pccl* functions
    ["programs"],            # *_main.c: pccl-master, pccl-fingerprint
]
RANK = {folder: i for i, tier in enumerate(FOLDER_ORDER) for folder in tier}
ORDER_DOC = "docs/README.md"
PLATFORM_SUFFIXES = ("_posix", "_linux", "_darwin", "_win32", "_none", "_cuda")

# Circles tolerated, as exact sets of units (folder/stem): none. Issue 31 broke the last two: the
# peer's settings helper went down to a leaf (ccoip/peer/ccoip_env.c), and the master's table of
# clients went below the state machine and its modules (ccoip_master_members.h), which ask the
# state machine through the `machine` table it fills. Do not add to this list: fix the circle.
KNOWN_CIRCLES = []


def folder_of(rel):
    return "programs" if rel.endswith("_main.c") else os.path.dirname(rel)


def resolve(rel, name, present):
    for cand in (name, os.path.join("include", name), os.path.join(os.path.dirname(rel), name)):
        if cand in present:
            return cand
    return None


def depth0(code):
    """The text outside every brace pair ({...} becomes {}), preprocessor lines dropped."""
    code = re.sub(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", "", code, flags=re.M)
    out, depth = [], 0
    for ch in code:
        if ch == "{":
            if depth == 0:
                out.append("{")
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                out.append("}")
        elif depth == 0:
            out.append(ch)
    return "".join(out)


FUNC = re.compile(r"\b([A-Za-z_]\w*)\s*\(((?:[^()]|\([^()]*\))*)\)\s*(\{\}|;)")
IDENT = re.compile(r"\b[A-Za-z_]\w*\b")


def parse(top, rel):
    code = srctree.strip_c_comments(srctree.read(top, rel))
    includes = re.findall(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', code, re.M)
    bare = srctree.strip_c_comments_and_strings(code)
    flat = depth0(bare)
    defined, declared = set(), set()
    for m in FUNC.finditer(flat):
        start = max(flat.rfind(";", 0, m.start()), flat.rfind("}", 0, m.start())) + 1
        head = flat[start:m.start()]
        if re.search(r"\b(typedef|return|sizeof)\b", head) or not head.strip():
            continue
        if m.group(3) == "{}":
            if not re.search(r"\bstatic\b", head):
                defined.add(m.group(1))
        else:
            declared.add(m.group(1))
    for m in re.finditer(r"\bextern\b[^;(]*?\b([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*;", flat):
        declared.add(m.group(1))
    if not rel.endswith((".h", ".cuh")):
        # Globals: a declarator at file scope that is neither static nor extern nor a typedef.
        for stmt in re.split(r"[;}]", flat):
            if re.search(r"\b(static|extern|typedef)\b|\(", stmt):
                continue
            m = re.search(r"\b([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*(?:=.*)?$", stmt.strip(), re.S)
            if m and not re.fullmatch(r"(struct|union|enum)\s+\w+\s*\{?", stmt.strip()):
                defined.add(m.group(1))
    return {"includes": includes, "defined": defined, "declared": declared, "uses": set(IDENT.findall(bare))}


def build(top):
    files = srctree.library_files(top)
    present = set(files)
    info = {rel: parse(top, rel) for rel in files}
    problems = []
    for rel in files:
        resolved = []
        for name in info[rel]["includes"]:
            target = resolve(rel, name, present)
            if target is None:
                problems.append(f"{rel}: #include \"{name}\" is not a library file (a quoted include of the tree "
                                f"must name it from the root, or a public header by its bare name)")
            elif target != rel:
                resolved.append(target)
        info[rel]["resolved"] = resolved

    # Units: each .c/.cu file its own; a platform file joins the unit of the one header whose
    # declarations it defines: X_posix.c joins X.h's, hash_cpus_posix.c hash_many.h's.
    unit = {rel: os.path.splitext(rel)[0] for rel in files if rel.endswith((".c", ".cu"))}
    plain = {u for rel, u in unit.items() if not u.endswith(PLATFORM_SUFFIXES)}
    for rel, u in list(unit.items()):
        if not u.endswith(PLATFORM_SUFFIXES):
            continue
        base = u.rsplit("_", 1)[0]
        homes = {os.path.splitext(h)[0] for h in info[rel]["resolved"]
                 if info[rel]["defined"] & info[h]["declared"]}
        homes = {h for h in homes if h in plain or h == base}
        if len(homes) == 1:
            unit[rel] = homes.pop()
    impl_units = set(unit.values())
    for rel in files:
        if rel.endswith((".h", ".cuh")):
            u = os.path.splitext(rel)[0]
            unit[rel] = u if u in impl_units else None  # None: an interface
    definer = {}
    for rel in files:
        if unit[rel] is not None and rel.endswith((".c", ".cu")):
            for s in info[rel]["defined"]:
                definer.setdefault(s, set()).add(rel)

    def seen_headers(rel, acc=None):
        acc = set() if acc is None else acc
        for h in info[rel]["resolved"]:
            if h not in acc:
                acc.add(h)
                seen_headers(h, acc)
        return acc

    # Edges (unit graph), and folder edges file -> file with the reason.
    edges, folder_edges = {}, []
    for rel in files:
        u = unit[rel]
        for h in info[rel]["resolved"]:
            folder_edges.append((rel, h, f'#include "{h}"'))
            if u is not None and unit[h] is not None and unit[h] != u:
                edges.setdefault(u, {}).setdefault(unit[h], f"{rel} includes {h}")
        if not rel.endswith((".c", ".cu")):
            continue
        visible = set()
        for h in seen_headers(rel):
            visible |= info[h]["declared"]
        for s in sorted((info[rel]["uses"] & visible) - info[rel]["defined"]):
            for d in sorted(definer.get(s, ())):
                if unit[d] != u:
                    edges.setdefault(u, {}).setdefault(unit[d], f"{rel} uses {s} of {d}")
                    folder_edges.append((rel, d, f"uses {s}"))
    return files, unit, edges, folder_edges, problems


def check_folders(folder_edges, problems):
    for src, dst, why in folder_edges:
        a, b = folder_of(src), folder_of(dst)
        if a == b:
            continue
        if a not in RANK or b not in RANK:
            problems.append(f"{src}: folder {a if a not in RANK else b} has no place in FOLDER_ORDER")
        elif RANK[b] >= RANK[a]:
            rel = "a sibling" if RANK[b] == RANK[a] else "a higher folder"
            problems.append(f"{src} reaches up: {why} ({b} is {rel} than {a})")


def circles(edges):
    """Strongly connected sets of two or more units (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    nodes = sorted(set(edges) | {v for vs in edges.values() for v in vs})
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, {}))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = set()
                    while True:
                        x = stack.pop()
                        on.discard(x)
                        comp.add(x)
                        if x == v:
                            break
                    if len(comp) > 1:
                        out.append(frozenset(comp))
            elif w not in index:
                index[w] = low[w] = counter[0]
                counter[0] += 1
                stack.append(w)
                on.add(w)
                work.append((w, iter(sorted(edges.get(w, {})))))
            elif w in on:
                low[v] = min(low[v], index[w])
    return out


def a_cycle(comp, edges):
    """One cycle through the set, as 'a -> b (why) -> ... -> a'."""
    start = min(comp)
    prev, frontier = {start: None}, collections.deque([start])  # breadth first: a shortest way round
    while frontier:
        v = frontier.popleft()
        for w in sorted(edges.get(v, {})):
            if w in comp and w not in prev:
                prev[w] = v
                frontier.append(w)
    back = next(v for v in sorted(comp) if start in edges.get(v, {}))
    path = [back]
    while path[-1] != start:
        path.append(prev[path[-1]])
    path.reverse()
    path.append(start)
    return "\n      ".join(f"{a} -> {b}   ({edges[a][b]})" for a, b in zip(path, path[1:]))


def check_doc(top, problems):
    """docs/README.md shows FOLDER_ORDER as lines "RANK FOLDER  what it holds"."""
    shown = {m.group(2): int(m.group(1)) for m in re.finditer(r"^(\d+) (\S+) ", srctree.read(top, ORDER_DOC), re.M)}
    if shown != RANK:
        problems.append(f"{ORDER_DOC} shows the folder order {sorted(shown.items(), key=lambda x: x[1])}, this test "
                        f"{sorted(RANK.items(), key=lambda x: x[1])}: make them agree")


def main():
    top = srctree.root()
    files, unit, edges, folder_edges, problems = build(top)
    check_doc(top, problems)
    check_folders(folder_edges, problems)
    found = circles(edges)
    known = [frozenset(c) for c in KNOWN_CIRCLES]
    for comp in found:
        if comp not in known:
            problems.append("a circle between files that KNOWN_CIRCLES does not list:\n    "
                            + "\n    ".join(sorted(comp)) + "\n    for example:\n      " + a_cycle(comp, edges))
    for k in known:
        if k not in found:
            problems.append("KNOWN_CIRCLES lists a circle that is no longer there as listed (it shrank or "
                            "went: good): replace its entry with what the test now finds, or delete it:\n    "
                            + "\n    ".join(sorted(k)))
    # Canaries: edges of each kind that must be found, so that a broken parser cannot pass.
    for a, b in [("ccoip/peer/ccoip_datalink", "reduce/reduce_kernels"),   # through reduce.h
                 ("ccoip/net/ccoip_conn", "ccoip/wire/ccoip_packets"),   # an include
                 ("ccoip/net/ccoip_shmpipe", "threadpark/threadpark_shared")]:
        if b not in edges.get(a, {}):
            problems.append(f"the scan no longer finds {a} -> {b} (a canary): the parser is broken")
    for p in problems:
        print("FAIL", p)
    nedges = sum(len(v) for v in edges.values())
    print(f"{len(files)} files, {len(set(u for u in unit.values() if u))} units, {nedges} unit edges, "
          f"{len(found)} circles ({len(known)} known), {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
