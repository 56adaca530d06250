"""tree_uses.py: what the source tree uses from the system: the headers it includes with <...>,
the Python modules it imports, the programs its scripts run. Each use keeps where it happens
("path:line"), so that a failure can name the file."""

import ast
import os
import re
import sys
import tomllib

import shell_words

# Build products, bundled third-party code and checkouts' private folders are not the tree.
SKIP_DIRS = {"third_party", "build", "__pycache__", "node_modules"}
C_EXTS = {".c", ".h", ".cu", ".cuh", ".cc", ".cpp", ".hpp"}
CXX_EXTS = {".cu", ".cuh", ".cc", ".cpp", ".hpp"}
INCLUDE = re.compile(r"^\s*#\s*include\s*<([^>]+)>", re.M)

# Standard-library modules that Debian ships in packages of their own (python3-tk, ...): they are
# checked like third-party ones.
DEBIAN_SPLIT_STDLIB = {"tkinter", "turtle", "distutils", "lib2to3", "venv", "ensurepip", "idlelib"}

# Words that start a command but are not programs: shell keywords and dash's builtins.
KEYWORDS = {"if", "then", "else", "elif", "do", "while", "until", "!", "{", "}", "time"}
SKIP_COMMAND = {"for", "fi", "done", "esac", "in", "select", "function"}
BUILTINS = set(". : [ [[ alias bg break cd continue echo eval exit export false fg getopts hash jobs "
               "kill local printf pwd read readonly return set shift source test times trap true type "
               "ulimit umask unalias unset wait let".split())
# Programs that run the program named after their own options.
WRAPPERS = {"timeout", "env", "nice", "nohup", "xargs", "sudo", "exec", "command", "stdbuf", "setsid"}
PYTHONS = re.compile(r"^(/usr/bin/)?python3?(\.\d+)?$")
COMMAND_NAME = re.compile(r"^(/[\w.+/-]+|[\w][\w.+-]*)$")
ASSIGNMENT = re.compile(r"^([A-Za-z_]\w*)=(.*)$", re.S)
FUNCTION_DEF = re.compile(r"^([ \t]*)([A-Za-z_]\w*)\s*\(\s*\)\s*\{?(.*)$", re.M)


class Uses:
    """kind ('header', 'module', 'command') -> name -> ["path:line", ...]"""

    def __init__(self, not_modules):
        self.by_kind = {"header": {}, "module": {}, "command": {}}
        self.files = {"c": 0, "python": 0, "shell": 0}
        self.not_modules = not_modules  # the standard library and the tree's own modules

    def add(self, kind, name, where):
        if kind == "module" and name in self.not_modules:
            return
        self.by_kind[kind].setdefault(name, [])
        if where not in self.by_kind[kind][name]:
            self.by_kind[kind][name].append(where)


def tree_files(root):
    """Relative paths of the tree's files, sorted."""
    out = []
    for d, dirs, files in os.walk(root):
        rel = os.path.relpath(d, root)
        dirs[:] = sorted(x for x in dirs
                         if x not in SKIP_DIRS and not x.startswith("bazel-")
                         and (not x.startswith(".") or x == ".ci")
                         and not (rel == "bench" and x == "out"))
        out += [os.path.normpath(os.path.join(rel, f)) for f in files]
    return sorted(out)


def _shebang(text):
    return text.split("\n", 1)[0] if text.startswith("#!") else ""


def _is_shell(path, text):
    if path.endswith(".sh") or os.path.basename(path) == "Makefile":
        return True
    line = _shebang(text)
    return bool(re.search(r"\b(sh|bash|dash)\b", line))


def _is_python(path, text):
    return path.endswith(".py") or "python" in _shebang(text)


def scan(root):
    paths = tree_files(root)
    uses = Uses((set(sys.stdlib_module_names) - DEBIAN_SPLIT_STDLIB) | own_python_modules(paths))
    texts = {}
    for p in paths:
        if os.path.splitext(p)[1] in C_EXTS or p.endswith((".sh", ".py", "Makefile", ".toml")) \
                or p == ".ci/run" or "." not in os.path.basename(p):
            try:
                with open(os.path.join(root, p), encoding="utf-8") as f:
                    texts[p] = f.read()
            except (UnicodeDecodeError, OSError):
                continue
    shell = {p: t for p, t in texts.items() if _is_shell(p, t)}
    functions = shell_functions(shell)
    for p, t in texts.items():
        ext = os.path.splitext(p)[1]
        if ext in C_EXTS:
            uses.files["c"] += 1
            _headers(uses, root, p, t, 1)
            _c_shell_outs(uses, p, t, functions)
        elif p in shell:
            uses.files["shell"] += 1
            _shell(uses, root, p, t, functions)
        elif _is_python(p, t):
            uses.files["python"] += 1
            _python(uses, p, t, functions)
        elif os.path.basename(p) == "pyproject.toml":
            # What `pip install` of the package needs to build it.
            for req in tomllib.loads(t).get("build-system", {}).get("requires", []):
                name = re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0].strip().lower().replace("-", "_")
                uses.add("module", name, p)
    return uses


def own_python_modules(paths):
    """Top-level names that the tree itself provides: every .py file's stem and every package."""
    own = set()
    for p in paths:
        if p.endswith(".py"):
            stem = os.path.splitext(os.path.basename(p))[0]
            own.add(os.path.basename(os.path.dirname(p)) if stem == "__init__" else stem)
    return own


def _headers(uses, root, path, text, first_line):
    for m in INCLUDE.finditer(text):
        name = m.group(1).strip()
        # The project's own headers, included with <...> the way its users write them.
        if os.path.exists(os.path.join(root, "include", name)) or os.path.exists(os.path.join(root, name)):
            continue
        line = first_line + text.count("\n", 0, m.start())
        uses.add("header", name, f"{path}:{line}")


# --- shell -------------------------------------------------------------------------------------

class Functions:
    """Shell functions defined in the tree, by file: name -> the number of leading arguments to drop
    before the program it runs with "$@", or None if it runs none. A script sees its own functions
    first, then everyone else's (scripts source each other)."""

    def __init__(self):
        self.by_file = {}

    def lookup(self, path, name):
        """(is a function, its shifts)"""
        for fns in [self.by_file.get(path, {})] + list(self.by_file.values()):
            if name in fns:
                return True, fns[name]
        return False, None


def shell_functions(shell_texts):
    fns = Functions()
    for path, text in shell_texts.items():
        for m in FUNCTION_DEF.finditer(text):
            indent, name, rest = m.groups()
            if rest.strip().startswith("}") or name in BUILTINS:
                continue
            body = rest
            if "}" not in rest.split("#")[0]:
                end = re.compile(r"^" + re.escape(indent) + r"\}", re.M).search(text, m.end())
                body = text[m.end():end.start() if end else len(text)]
            shifts = None
            cmds, _ = shell_words.lex(body)
            n = 0
            for c in cmds:
                w = [x for x in c.words if x not in KEYWORDS]
                if w[:1] == ["shift"]:
                    n += int(w[1]) if len(w) > 1 and w[1].isdigit() else 1
                if w[:1] == ["$@"]:
                    shifts = n
                    break
            fns.by_file.setdefault(path, {})[name] = shifts
    return fns


def _variables(commands):
    """Literal values assigned to each variable in a script (an unknown value is left out)."""
    values = {}
    for c in commands:
        for w in c.words:
            m = ASSIGNMENT.match(w)
            if not m:
                break
            name, value = m.groups()
            d = re.fullmatch(r"\$\{(\w+):?-([^}$]*)\}", value)
            if d and d.group(1) == name:
                value = d.group(2)
            if value and "$" not in value:
                values.setdefault(name, set()).add(value)
    return values


def _resolve(word, variables):
    """The programs a command word may name."""
    if not word.startswith("$"):
        return [word]
    m = re.fullmatch(r"\$\{(\w+):?-([^}$]*)\}", word)
    if m:
        return [m.group(2)] if m.group(2) else []
    m = re.fullmatch(r"\$\{?(\w+)\}?", word)
    return sorted(variables.get(m.group(1), ())) if m else []


def _shell(uses, root, path, text, functions):
    if os.path.basename(path) == "Makefile":
        text = makefile_recipes(text)
    cmds, heredocs = shell_words.lex(text)
    for line, body in heredocs:
        _headers(uses, root, path, body, line + 1)
    shell_commands(uses, path, cmds, functions, _variables(cmds))
    first = _shebang(text).split()
    if first and os.path.basename(path) != "Makefile":
        _program(uses, first[0][2:], f"{path}:1")
        if first[0].endswith("/env") and len(first) > 1:
            _program(uses, first[1], f"{path}:1")


def shell_commands(uses, path, cmds, functions, variables, line=None):
    """Records the programs of lexed commands; line, when given, is where they all sit (the
    commands of a trap's or a C string's text)."""
    in_case = False
    for c in cmds:
        w = c.words
        i = 0
        while i < len(w) and w[i] in KEYWORDS:
            i += 1
        if i == len(w):
            continue
        if w[i] == "case":
            in_case = True
            continue
        if w[i] == "esac":
            in_case = False
            continue
        # A case pattern: "a|b)" reads as the words a and b ended by '|' and ')'.
        if in_case and len(w) - i == 1 and c.end in ("|", ")"):
            continue
        if w[i] in SKIP_COMMAND:
            continue
        _command(uses, f"{path}:{line or c.line}", w[i:], functions, variables)


def _command(uses, where, w, functions, variables):
    while w and ASSIGNMENT.match(w[0]):
        w = w[1:]
    if not w:
        return
    head = w[0]
    path, line = where.rsplit(":", 1)
    if head in ("trap", "eval") and len(w) > 1:
        cmds, _ = shell_words.lex(w[1] if head == "trap" else " ".join(w[1:]))
        shell_commands(uses, path, cmds, functions, variables, line)
        return
    if head in BUILTINS:
        return
    is_function, shifts = functions.lookup(path, head)
    if is_function:
        if shifts is not None:
            _command(uses, where, w[1 + shifts:], functions, variables)
        return
    for prog in _resolve(head, variables):
        if not COMMAND_NAME.match(prog) or ("/" in prog and not prog.startswith("/")):
            continue  # a variable we cannot see through, or one of the tree's own programs
        base = os.path.basename(prog)
        if base == "command":
            if len(w) > 1 and w[1] in ("-v", "-V"):
                return  # a presence check: what it looks for is used elsewhere if at all
            _command(uses, where, w[1:], functions, variables)
            return
        if base != "exec":
            _program(uses, prog, where)
        rest = w[1:]
        if base in WRAPPERS and base != "command":
            takes_arg = {"timeout": {"-s", "-k", "--signal", "--kill-after"}, "nice": {"-n"},
                         "sudo": {"-u", "-g"}}.get(base, set())
            while rest and (rest[0].startswith("-") or (base == "env" and ASSIGNMENT.match(rest[0]))):
                rest = rest[2:] if rest[0] in takes_arg else rest[1:]
            if base == "timeout":
                rest = rest[1:]
            _command(uses, where, rest, functions, variables)
        elif base == "ip" and rest[:2] == ["netns", "exec"]:
            _command(uses, where, rest[3:], functions, variables)
        elif base in ("sh", "bash", "dash") and rest[:1] == ["-c"] and len(rest) > 1:
            cmds, _ = shell_words.lex(rest[1])
            shell_commands(uses, path, cmds, functions, variables, line)
        elif PYTHONS.match(prog) and "-m" in rest:
            j = rest.index("-m")
            if j + 1 < len(rest):
                uses.add("module", rest[j + 1].split(".")[0], where)


def _program(uses, prog, where):
    uses.add("command", prog, where)


def makefile_recipes(text):
    """The recipes of a Makefile as one shell text, with the Makefile's own variables expanded.
    Lines that are not recipes become empty lines, so line numbers still match the file."""
    variables = {"MAKE": "make"}
    for m in re.finditer(r"^([A-Za-z_]\w*)\s*[:?]?=\s*(.*)$", text, re.M):
        variables.setdefault(m.group(1), m.group(2).strip())

    def expand(s, depth=0):
        s = re.sub(r"\$\((\w+)\)", lambda m: expand(variables.get(m.group(1), ""), depth + 1) if depth < 5 else "", s)
        return s.replace("$$", "$")

    out = []
    for line in text.split("\n"):
        if line.startswith("\t"):
            out.append(expand(line.lstrip("\t").lstrip("@-+")))
        else:
            out.append("")
    return "\n".join(out)


# --- C programs that shell out --------------------------------------------------------------------

C_STRINGS = r'((?:"(?:[^"\\\n]|\\.)*"\s*)+)'


def _c_shell_outs(uses, path, text, functions):
    """Commands that C code hands to the shell: system()/popen() and local printf-style wrappers
    of them, with literal command strings."""
    names = {"system", "popen"}
    for m in re.finditer(r"^\w[\w\s\*]*?\b(\w+)\s*\(\s*const\s+char\s*\*\s*\w+\s*,\s*\.\.\.\s*\)\s*\{", text, re.M):
        end = text.find("\n}", m.end())
        if re.search(r"\b(system|popen)\s*\(", text[m.end():end]):
            names.add(m.group(1))
    call = re.compile(r"\b(" + "|".join(sorted(names)) + r")\s*\(\s*" + C_STRINGS)
    for m in call.finditer(text):
        literal = "".join(re.findall(r'"((?:[^"\\\n]|\\.)*)"', m.group(2)))
        cmds, _ = shell_words.lex(literal.encode().decode("unicode_escape"))
        shell_commands(uses, path, cmds, functions, {}, 1 + text.count("\n", 0, m.start()))


# --- Python ------------------------------------------------------------------------------------------

SUBPROCESS_CALLS = {"run", "Popen", "call", "check_call", "check_output", "system", "popen",
                    "execv", "execvp", "execl", "execlp", "spawnlp", "spawnvp"}


def _python(uses, path, text, functions):
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as e:
        uses.add("module", f"<syntax error: {e.msg}>", f"{path}:{e.lineno}")
        return
    constants = {}  # module-level NAME = "literal" or NAME = sys.executable
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            v = _py_word(node.value, {})
            if v:
                constants[node.targets[0].id] = v
    for node in ast.walk(tree):
        where = f"{path}:{getattr(node, 'lineno', 1)}"
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        for n in names:
            uses.add("module", n.split(".")[0], where)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Name) and node.func.value.id in ("subprocess", "os") \
                and node.func.attr in SUBPROCESS_CALLS and node.args:
            _py_call(uses, path, where, node.args[0], constants, functions)
    first = _shebang(text).split()
    if first:
        _program(uses, first[0][2:], f"{path}:1")
        if first[0].endswith("/env") and len(first) > 1:
            _program(uses, first[1], f"{path}:1")


def _py_word(node, constants):
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
            and (node.value.id, node.attr) == ("sys", "executable"):
        return "/usr/bin/python3"  # the tree runs its Python code with Debian's interpreter
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    return None


def _py_call(uses, path, where, arg, constants, functions):
    if isinstance(arg, (ast.List, ast.Tuple)):
        words = [_py_word(e, constants) for e in arg.elts]
        words = [w if w is not None else "$unknown" for w in words]
        if words:
            _command(uses, where, words, functions, {})
    else:
        line = _py_word(arg, constants)
        if line:
            cmds, _ = shell_words.lex(line)
            shell_commands(uses, path, cmds, functions, {}, where.rsplit(":", 1)[1])
