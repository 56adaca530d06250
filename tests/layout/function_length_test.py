#!/usr/bin/python3 -B
"""function_length_test.py [ROOT]: no function of the library runs over MAX_LINES lines (issue 31:
each fits on a screen; a longer one is split into named steps). Counts from the line of the
function's name to its closing brace, in the library's .c and .cu files (srctree.LIBRARY_DIRS), with
comments and strings blanked so that their braces do not count. Tables (initialisers) are not
functions. Run by hand: /usr/bin/python3 tests/layout/function_length_test.py."""

import re
import sys

import srctree

MAX_LINES = 80


def functions(text):
    """(name, first line, line count) of every function body in C text without comments or strings."""
    text = re.sub(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.M)
    out, depth, head_start, open_at = [], 0, 0, None
    for i, ch in enumerate(text):
        if ch == "{":
            if depth == 0:
                head = text[head_start:i]
                m = re.search(r"\b([A-Za-z_]\w*)\s*\((?:[^()]|\([^()]*\))*\)\s*$", head)
                is_func = m is not None and "=" not in head[:m.start()] and \
                    not re.search(r"\b(struct|union|enum|typedef)\b", head[:m.start()])
                open_at = (m.group(1), text.count("\n", 0, head_start + m.start(1)) + 1) if is_func else None
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                if open_at is not None:
                    name, first = open_at
                    out.append((name, first, text.count("\n", 0, i) + 2 - first))
                open_at = None
                head_start = i + 1
        elif ch == ";" and depth == 0:
            head_start = i + 1
    return out


def main():
    top = srctree.root()
    problems, count = [], 0
    for rel in srctree.library_files(top):
        if not rel.endswith((".c", ".cu")):
            continue
        text = srctree.strip_c_comments_and_strings(srctree.read(top, rel))
        for name, line, n in functions(text):
            count += 1
            if n > MAX_LINES:
                problems.append(f"{rel}:{line}: {name} is {n} lines (at most {MAX_LINES}): split it into named steps")
    for p in problems:
        print("FAIL " + p)
    print(f"{count} functions, {len(problems)} over {MAX_LINES} lines")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
