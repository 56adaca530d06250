"""shell_words.py: the simple commands of a POSIX shell text, enough to see which programs it runs.

Not a shell parser: it knows quotes, escapes, comments, $(...), `...`, $((...)), ${...}, heredocs and
the operators that end a command. Quoted text stays inside its word (so "echo '(make)'" runs no
make), and every command substitution is reported as a command of its own."""

SEPARATORS = ";&|()\n"


class Command:
    """One simple command: its words (quotes removed; a command substitution inside a word reads
    '$()'), the line it starts on, and the operator that ended it ('' at the end of the text)."""

    def __init__(self, words, line, end):
        self.words, self.line, self.end = words, line, end


class _Lexer:
    def __init__(self, text):
        self.s, self.i, self.line = text, 0, 1
        self.commands, self.heredocs = [], []   # heredocs: (first line, body)
        self._pending_heredocs = []             # (delimiter, strip tabs) seen on the current line

    def peek(self, k=0):
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def advance(self, n=1):
        for _ in range(n):
            if self.peek() == "\n":
                self.line += 1
            self.i += 1

    def run(self, closer=""):
        """Reads commands until closer (')' of $(, '`') or the end; returns at the closer, consumed."""
        words, word, in_word, start, redirect, depth = [], [], False, self.line, False, 0

        def end_word():
            nonlocal word, in_word, redirect
            if in_word:
                (None if redirect else words.append("".join(word)))
                redirect = False
            word, in_word = [], False

        def end_command(op):
            nonlocal words, start
            end_word()
            if words:
                self.commands.append(Command(words, start, op))
            words, start = [], self.line

        while self.i < len(self.s):
            c = self.peek()
            if closer == "`" and c == "`":
                self.advance()
                break
            if c == ")" and depth == 0 and closer == ")":
                self.advance()
                break
            if c == "\\":
                if self.peek(1) == "\n":
                    self.advance(2)
                    continue
                word.append(self.peek(1))
                in_word = True
                self.advance(2)
            elif c == "#" and not in_word:
                while self.i < len(self.s) and self.peek() != "\n":
                    self.advance()
            elif c == "'":
                self.advance()
                while self.i < len(self.s) and self.peek() != "'":
                    word.append(self.peek())
                    self.advance()
                self.advance()
                in_word = True
            elif c == '"':
                self.advance()
                self._double_quoted(word)
                in_word = True
            elif c == "$":
                self._dollar(word)
                in_word = True
            elif c == "`":
                self.advance()
                self.run("`")
                word.append("$()")
                in_word = True
            elif c in " \t":
                end_word()
                self.advance()
            elif c in "<>":
                # A redirection: its target word names a file, not a program.
                if in_word and "".join(word).isdigit():
                    word, in_word = [], False
                end_word()
                if c == "<" and self.peek(1) == "<":
                    self.advance(2)
                    self._heredoc_start()
                    continue
                while self.peek() in "<>&|":
                    self.advance()
                redirect = True
            elif c in SEPARATORS:
                op = c
                if c in "&|;" and self.peek(1) == c:
                    op = c + c
                if c == "(":
                    depth += 1
                elif c == ")":
                    depth = max(depth - 1, 0)
                self.advance(len(op))
                end_command(op)
                if c == "\n":
                    self._read_heredoc_bodies()
            else:
                word.append(c)
                in_word = True
                self.advance()
        end_command("")

    def _double_quoted(self, word):
        while self.i < len(self.s) and self.peek() != '"':
            c = self.peek()
            if c == "\\":
                word.append(self.peek(1))
                self.advance(2)
            elif c == "$":
                self._dollar(word)
            elif c == "`":
                self.advance()
                self.run("`")
                word.append("$()")
            else:
                word.append(c)
                self.advance()
        self.advance()

    def _dollar(self, word):
        if self.s.startswith("$((", self.i):
            self.advance(3)
            depth = 2
            while self.i < len(self.s) and depth:
                depth += {"(": 1, ")": -1}.get(self.peek(), 0)
                self.advance()
            word.append("$(())")
        elif self.peek(1) == "(":
            self.advance(2)
            self.run(")")
            word.append("$()")
        elif self.peek(1) == "{":
            j, depth = self.i + 2, 1
            while j < len(self.s) and depth:
                depth += {"{": 1, "}": -1}.get(self.s[j], 0)
                j += 1
            word.append(self.s[self.i:j])
            self.advance(j - self.i)
        else:
            word.append("$")
            self.advance()

    def _heredoc_start(self):
        strip = self.peek() == "-"
        if strip:
            self.advance()
        while self.peek() in " \t":
            self.advance()
        delim = []
        while self.i < len(self.s) and self.peek() not in " \t\n;&|<>()":
            if self.peek() not in "'\"\\":
                delim.append(self.peek())
            self.advance()
        self._pending_heredocs.append(("".join(delim), strip))

    def _read_heredoc_bodies(self):
        for delim, strip in self._pending_heredocs:
            first, body = self.line, []
            while self.i < len(self.s):
                end = self.s.find("\n", self.i)
                end = len(self.s) if end < 0 else end
                text = self.s[self.i:end]
                self.advance(end - self.i + 1)
                if (text.lstrip("\t") if strip else text) == delim:
                    break
                body.append(text)
            self.heredocs.append((first, "\n".join(body)))
        self._pending_heredocs = []


def lex(text):
    """Returns (commands, heredocs) of a shell text: a list of Command, and (line, body) pairs."""
    lexer = _Lexer(text)
    lexer.run()
    # Commands inside $(...) are appended before the command around them; order by line.
    lexer.commands.sort(key=lambda c: c.line)
    return lexer.commands, lexer.heredocs
