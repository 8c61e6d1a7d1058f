"""Static analysis of ``operational-value`` Bash (docs/graders.md): detected file writes and dynamic
execution are rejected before the script may run.

The script is parsed with tree-sitter-bash and every node is visited once. A parse with errors
is rejected outright: what the parser could not read, the analysis cannot vouch for. Then:

* **Redirections** may only write to ``/dev/null``, ``/dev/stdout``, ``/dev/stderr``,
  ``/dev/fd/N``, a process substitution, or another descriptor (``>&2``, ``2>&1``, ``>&-``).
  ``>2`` (a file named ``2``) and ``<>`` (opens for writing) are writes.
* **Commands** are classified by their literal name (path and backslashes stripped):
  writers (``rm``, ``cp``, ``tee``, ...) are rejected; tools that run code the analysis cannot see
  (``eval``, interpreters, ``make``, ``ssh``, ...) are rejected; tools that write only with some
  options (``sed -i``, ``sort -o``, ``curl -o``, ``dd of=``, ``tar x``, ``find -delete``, ...) are
  checked for those options; wrappers (``env``, ``timeout``, ``xargs``, ``find -exec``, ``exec``,
  ...) have the command they run checked in turn; ``bash -c``/``sh -c`` bodies and ``trap``
  actions are parsed and checked when they are literal, rejected when they are not.
* **Dynamic execution**: a command name that is an expansion (``$cmd``), ``source``/``.`` of a
  non-literal path, names declared, unset or assigned through expansions, ``${x@P}`` (prompt
  expansion runs command substitutions found in data), and ``sed``/``awk`` programs containing
  expansions (session text would become program text) are rejected.

Each rejection names its line and the construct. This is a guard against mistakes, not a
sandbox: static analysis of Bash is not proof of safety (docs/graders.md). Known blind spots are
documented rather than guessed at: arithmetic evaluation of data (``[[ $x -eq 1 ]]`` evaluates
``$x`` as an expression, which can run a command substitution hidden in an array subscript), and
programs a read-only tool loads from elsewhere. Authors must never execute session text as code.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from tree_sitter import Node, Parser, Query, QueryCursor

MAX_NESTING: Final = 8


@dataclass(frozen=True, slots=True, order=True)
class Rejection:
    """One reason a script may not run: where, what construct, and why."""

    line: int
    construct: str
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.construct}: {self.reason}"


@dataclass(frozen=True, slots=True)
class ShellAnalysis:
    """The analysis of one script; ``accepted`` when nothing was rejected."""

    rejections: tuple[Rejection, ...] = ()

    @property
    def accepted(self) -> bool:
        return not self.rejections

    def summary(self) -> str:
        if self.accepted:
            return "accepted: no file writes or dynamic execution detected"
        return "rejected:\n" + "\n".join(f"  {r}" for r in self.rejections)


class BashAnalyzerUnavailable(RuntimeError):
    """tree-sitter or its Bash grammar is not installed; scripts cannot be checked, so none run."""


@functools.cache
def _parser() -> Parser:
    """Imported lazily: only evals with an ``operational-value`` grader pay for the grammar."""
    try:
        import tree_sitter_bash
        from tree_sitter import Language, Parser
    except ImportError as exc:  # pragma: no cover - both are dependencies of mst
        raise BashAnalyzerUnavailable(f"the Bash analyzer needs tree-sitter and tree-sitter-bash ({exc})") from None
    return Parser(Language(tree_sitter_bash.language()))


@functools.cache
def _query() -> Query:
    from tree_sitter import Query

    language = _parser().language
    assert language is not None
    return Query(language, " ".join(f"({kind}) @{kind}" for kind in _NODE_CHECKS))


def _query_cursor() -> QueryCursor:
    from tree_sitter import QueryCursor

    return QueryCursor(_query())


# ---------------------------------------------------------------------------------------------
# Command tables

WRITERS: Final = frozenset({
    "tee", "cp", "mv", "rm", "touch", "mkdir", "rmdir", "truncate", "ln", "link", "unlink", "install",
    "chmod", "chown", "chgrp", "chattr", "setfacl", "shred", "mkfifo", "mknod", "mktemp", "wget", "rsync",
    "scp", "sftp", "ftp", "patch", "split", "csplit", "fallocate", "mount", "umount", "crontab", "zip",
    "cpio", "ed", "ex", "vi", "vim", "nvim", "emacs", "nano", "script", "sponge", "dos2unix", "unix2dos",
    "sqlite3", "mkfs", "flock",
})  # fmt: skip
CODE_RUNNERS: Final = frozenset({
    "eval", "python", "python2", "python3", "perl", "ruby", "node", "nodejs", "deno", "bun", "php", "lua",
    "luajit", "Rscript", "R", "tclsh", "wish", "expect", "pwsh", "powershell", "make", "gmake", "cmake",
    "npm", "npx", "yarn", "pnpm", "pip", "pip3", "docker", "podman", "kubectl", "ssh", "su", "sudo", "doas",
    "gdb", "busybox", "alias", "enable", "fc", "bind", "complete", "compgen", "osascript", "at", "batch",
    "watch", "parallel", "chroot", "nsenter", "unshare", "firejail", "strace", "ltrace", "bwrap", "systemd-run",
})  # fmt: skip
SHELLS: Final = frozenset({"bash", "sh", "dash", "zsh", "ksh", "mksh", "fish", "csh", "tcsh", "rbash", "ash"})
COMPRESSORS: Final = frozenset({
    "gzip", "gunzip", "bzip2", "bunzip2", "xz", "unxz", "lzma", "unlzma", "zstd", "unzstd", "lz4",
    "compress", "uncompress", "pigz", "unpigz",
})  # fmt: skip
_READ_ONLY_GIT: Final = frozenset({
    "log", "show", "diff", "status", "rev-parse", "ls-files", "ls-tree", "cat-file", "grep", "blame",
    "describe", "shortlog", "rev-list", "merge-base", "name-rev", "for-each-ref", "version", "help",
})  # fmt: skip
_SAFE_DEVICES: Final = re.compile(r"^/dev/(?:null|stdout|stderr|fd/\d+)$")
_GLOB: Final = re.compile(r"[*?\[]")
_SIMPLE_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\[[^$`\]]*\])?$")
_LITERAL_CHILDREN: Final = frozenset({"string_content"})
_EXPANSIONS: Final = frozenset({
    "simple_expansion", "expansion", "command_substitution", "process_substitution", "arithmetic_expansion",
})  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Literal text of a word


def _text(node: Node) -> str:
    return node.text.decode("utf-8", "replace") if node.text is not None else ""


def _unescape_word(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text, flags=re.S) if "\\" in text else text


def literal(node: Node) -> str | None:
    """The value of a word when it has no expansions (quotes removed), else None."""
    kind = node.type
    if kind in ("word", "number"):
        return _unescape_word(_text(node))
    if kind == "raw_string":
        return _text(node)[1:-1]
    if kind == "string":
        if any(c.is_named and c.type not in _LITERAL_CHILDREN for c in node.children):
            return None
        return re.sub(r'\\([$`"\\\n])', r"\1", _text(node)[1:-1])
    if kind == "ansi_c_string":
        return _text(node)[2:-1]
    if kind == "concatenation":
        parts = [literal(c) for c in node.children]
        return None if any(p is None for p in parts) else "".join(p for p in parts if p is not None)
    return None


def _has_glob(node: Node) -> bool:
    """Unquoted glob characters make a word's value depend on the file system."""
    if node.type == "word":
        return bool(_GLOB.search(_text(node).replace("\\[", "")))
    return any(_has_glob(c) for c in node.children if c.type in ("word", "concatenation"))


def _walk(node: Node) -> Iterator[Node]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))


# ---------------------------------------------------------------------------------------------
# The analysis


@dataclass
class _Word:
    """One argument: its node and literal value (None when it holds an expansion)."""

    node: Node
    value: str | None


@dataclass
class _Analyzer:
    line_offset: int = 0
    depth: int = 0
    found: list[Rejection] = field(default_factory=list)
    source: bytes = b""

    def reject(self, node: Node, construct: str, reason: str) -> None:
        self.found.append(Rejection(node.start_point[0] + 1 + self.line_offset, construct[:80], reason))

    # --- the tree ------------------------------------------------------------------------------

    def program(self, source: bytes) -> None:
        self.source = source
        tree = _parser().parse(source)
        if tree.root_node.has_error:
            bad = next((n for n in _walk(tree.root_node) if n.type == "ERROR" or n.is_missing), tree.root_node)
            self.reject(bad, _text(bad).split("\n", 1)[0] or bad.type,
                        "the script does not parse as Bash, so it cannot be analyzed")  # fmt: skip
            return
        # One query, run in C, finds the few node types that matter: visiting every node from
        # Python cost several times the 50 ms budget on a 64 KiB script.
        for kind, nodes in _query_cursor().captures(tree.root_node).items():
            handler = _NODE_CHECKS[kind]
            for node in nodes:
                handler(self, node)

    def nested(self, node: Node, body: str, construct: str) -> None:
        """Check a literal Bash body (``bash -c '...'``, a ``trap`` action) as its own script."""
        if self.depth >= MAX_NESTING:
            self.reject(node, construct, f"nested more than {MAX_NESTING} levels deep")
            return
        inner = _Analyzer(self.line_offset + node.start_point[0], self.depth + 1)
        inner.program(body.encode("utf-8", "surrogateescape"))
        self.found.extend(inner.found)

    # --- node checks ---------------------------------------------------------------------------

    def redirect(self, node: Node) -> None:
        operator = next((_text(c) for c in node.children if not c.is_named), "")
        destination = node.child_by_field_name("destination")
        if ("<" in operator and operator != "<>") or operator == ">&-":
            return
        if destination is None or destination.type == "process_substitution":
            return
        value = literal(destination)
        if operator in (">&", "<&", "<>&") and destination.type == "number":
            return
        if value is not None and (_SAFE_DEVICES.match(value) or (operator in (">&", "<&") and value == "-")):
            return
        target = value if value is not None else _text(destination)
        self.reject(node, _text(node), f"redirection writes to {target!r} (only /dev/null, /dev/stdout, "
                                       "/dev/stderr or another descriptor are allowed)")  # fmt: skip

    def command(self, node: Node) -> None:
        name = node.child_by_field_name("name")
        if name is None:
            return
        if node.start_point[0] != node.end_point[0] and self.joins_lines(node):
            # Standalone, the same text parses as the separate commands Bash will run.
            self.nested(node, _text(node), _text(node).split("\n", 1)[0])
            return
        base = self.command_name(node, name)
        if base is not None and base in _CHECKED:  # arguments are only read for commands that matter
            self.invocation(node, base, [_Word(a, literal(a)) for a in node.children_by_field_name("argument")])

    def joins_lines(self, node: Node) -> bool:
        """A command's words are separated by an unescaped newline only when the grammar mis-parsed:
        after a pipeline of three or more stages, tree-sitter-bash 0.25 can take the next line's
        words as more arguments of the last stage, which would hide that line's command."""
        children = node.children
        for before, after in itertools.pairwise(children):
            gap = self.source[before.end_byte : after.start_byte]
            if b"\n" in gap and b"\n" in gap.replace(b"\\\n", b""):
                return True
        return False

    def command_name(self, node: Node, name: Node) -> str | None:
        """The command's literal base name; None (and a rejection) when it is computed at run time."""
        word = name.named_children[0] if name.type == "command_name" and name.named_children else name
        value = literal(word)
        if value is None or (word.type in ("word", "concatenation") and _has_glob(word)):
            self.reject(node, _text(name), "the command name is an expansion; what runs cannot be analyzed")
            return None
        return value.rsplit("/", 1)[-1]

    def wrapped(self, node: Node, name: Node, args: Sequence[_Word]) -> None:
        """A command run by another (``xargs rm``, ``env cmd``), given as its name and arguments."""
        base = self.command_name(node, name)
        if base is not None and base in _CHECKED:
            self.invocation(node, base, args)

    def invocation(self, node: Node, base: str, args: Sequence[_Word]) -> None:
        """Apply the command tables to one command, wherever it came from."""
        check = _COMMAND_CHECKS.get(base)
        if base in WRITERS:
            self.reject(node, _text(node), f"'{base}' writes files")
        elif base in CODE_RUNNERS:
            self.reject(node, _text(node), f"'{base}' runs code the analysis cannot see")
        elif base in SHELLS:
            self.shell(node, base, args)
        elif base in COMPRESSORS:
            self.compressor(node, base, args)
        elif check is not None:
            check(self, node, args)

    def expansion(self, node: Node) -> None:
        if re.search(r"@P\}$", _text(node)):
            self.reject(node, _text(node), "prompt expansion (@P) runs command substitutions found in data")

    def declaration(self, node: Node) -> None:
        for child in node.named_children:
            if child.type in ("variable_assignment", "variable_name"):
                continue
            text = literal(child)
            if text is None or not (text.startswith(("-", "+")) or _SIMPLE_NAME.match(text.split("=", 1)[0])):
                self.reject(node, _text(node), "declares a name computed at run time; it cannot be analyzed")
                return

    def unset(self, node: Node) -> None:
        for child in node.named_children:
            if child.type != "variable_name" and literal(child) is None:
                self.reject(node, _text(node), "unsets a name computed at run time; it cannot be analyzed")
                return

    # --- command families ----------------------------------------------------------------------

    def run_wrapped(self, node: Node, args: Sequence[_Word], start: int | None) -> None:
        """Check the command a wrapper runs (``args[start:]``); None means it runs nothing."""
        if start is None or start >= len(args):
            return
        self.wrapped(node, args[start].node, args[start + 1 :])

    def shell(self, node: Node, name: str, args: Sequence[_Word]) -> None:
        """``bash -c 'literal'`` is parsed and checked; every other shell invocation runs code
        (a script file, or stdin) the analysis cannot see."""
        i = 0
        while i < len(args) and args[i].value is not None:
            value = args[i].value or ""
            if value in ("-o", "+o", "-O", "+O"):
                i += 2
                continue
            if _short_has(value, "c"):
                body = args[i + 1] if i + 1 < len(args) else None
                if body is None or body.value is None:
                    self.reject(node, _text(node), f"'{name} -c' with a non-literal command cannot be analyzed")
                else:
                    self.nested(body.node, body.value, _text(node))
                return
            if not value.startswith(("-", "+")):
                break
            i += 1
        self.reject(node, _text(node), f"'{name}' runs a script the analysis cannot see (only {name} -c 'literal')")

    def compressor(self, node: Node, name: str, args: Sequence[_Word]) -> None:
        """Compressors replace files unless told to write to stdout, test or list."""
        flags = [a.value for a in args if a.value is not None and a.value.startswith("-")]
        to_stdout = any(f in ("--stdout", "--to-stdout", "--test", "--list") or
                        (not f.startswith("--") and set(f[1:]) & set("ctl")) for f in flags)  # fmt: skip
        if not to_stdout or any(f.startswith(("-o", "--output")) for f in flags):
            self.reject(node, _text(node), f"'{name}' writes files unless it writes to stdout (-c)")


# ---------------------------------------------------------------------------------------------
# Per-command checks (each: analyzer, the command node, its arguments)

Check = Callable[[_Analyzer, "Node", Sequence[_Word]], None]


def _values(args: Sequence[_Word]) -> list[str]:
    return [a.value if a.value is not None else "\0" for a in args]


def _short_has(flag: str, letters: str) -> bool:
    return flag.startswith("-") and not flag.startswith("--") and bool(set(flag[1:]) & set(letters))


def _skip_options(args: Sequence[_Word], with_value: frozenset[str], *, positional: int = 0) -> int | None:
    """Index of the wrapped command after options (those in ``with_value`` take an argument) and
    ``positional`` leading operands (``timeout``'s duration); None if there is no command."""
    i = 0
    while i < len(args):
        value = args[i].value
        if value is None:
            return i
        if value == "--":
            i += 1
            break
        if not value.startswith("-") or value == "-":
            break
        i += 2 if value in with_value else 1
    i += positional
    return i if i < len(args) else None


def _dynamic(analyzer: _Analyzer, node: Node, args: Sequence[_Word], what: str) -> bool:
    if any(a.value is None for a in args):
        analyzer.reject(node, _text(node), f"{what} contains an expansion; session text would become code")
        return True
    return False


def _env(a: _Analyzer, node: Node, args: Sequence[_Word]) -> None:
    values = _values(args)
    if any(v in ("-S", "--split-string") or v.startswith("--split-string=") for v in values):
        a.reject(node, _text(node), "'env -S' splits a string into a command; it cannot be analyzed")
        return
    i = 0
    while i < len(args) and args[i].value is not None:
        value = args[i].value or ""
        if value in ("-u", "--unset", "-C", "--chdir"):
            i += 2
        elif value.startswith("-") or re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", value):
            i += 1
        else:
            break
    a.run_wrapped(node, args, i)


def _wrapper(with_value: frozenset[str], positional: int = 0) -> Check:
    def check(a: _Analyzer, node: Node, args: Sequence[_Word]) -> None:
        a.run_wrapped(node, args, _skip_options(args, with_value, positional=positional))

    return check


def _time(a: _Analyzer, node: Node, args: Sequence[_Word]) -> None:
    if any(v in ("-o", "--output", "-a", "--append") or v.startswith("--output=") for v in _values(args)):
        a.reject(node, _text(node), "'time -o' writes a file")
        return
    a.run_wrapped(node, args, _skip_options(args, frozenset({"-f", "--format"})))


def _command_builtin(a: _Analyzer, node: Node, args: Sequence[_Word]) -> None:
    values = _values(args)
    if any(v in ("-v", "-V") for v in values):
        return  # a lookup, nothing runs
    a.run_wrapped(node, args, _skip_options(args, frozenset()))


def _exec(a: _Analyzer, node: Node, args: Sequence[_Word]) -> None:
    a.run_wrapped(node, args, _skip_options(args, frozenset({"-a"})))


def _xargs(a: _Analyzer, node: Node, args: Sequence[_Word]) -> None:
    takes = frozenset({"-a", "-d", "-E", "-I", "-L", "-n", "-P", "-s", "--arg-file", "--delimiter", "--max-args",
                       "--max-procs", "--max-chars", "--max-lines", "--process-slot-var"})  # fmt: skip
    a.run_wrapped(node, args, _skip_options(args, takes))


def _find(a: _Analyzer, node: Node, args: Sequence[_Word]) -> None:
    values = _values(args)
    for i, value in enumerate(values):
        if value in ("-delete", "-fprint", "-fprint0", "-fprintf", "-fls"):
            a.reject(node, _text(node), f"'find {value}' writes or deletes files")
            return
        if value in ("-exec", "-execdir", "-ok", "-okdir"):
            end = next((j for j in range(i + 1, len(values)) if values[j] in (";", "+")), len(values))
            if i + 1 < end:
                a.wrapped(node, args[i + 1].node, args[i + 2 : end])


def _sed(a: _Analyzer, node: Node, args: Sequence[_Word]) -> None:
    values = _values(args)
    if any(v.startswith("--in-place") or (_short_has(v, "i") and not v.startswith("-e")) for v in values):
        a.reject(node, _text(node), "'sed -i' edits files in place")
        return
    if any(v in ("-f", "--file") or v.startswith("--file=") for v in values):
        a.reject(node, _text(node), "'sed -f' loads a program the analysis cannot see")
        return
    scripts = [args[i + 1] for i, v in enumerate(values[:-1]) if v in ("-e", "--expression")]
    if not scripts:
        first = next((w for w in args if w.value is None or not w.value.startswith("-")), None)
        scripts = [first] if first is not None else []
    if _dynamic(a, node, scripts, "the sed program"):
        return
    for script in scripts:
        if _sed_writes(script.value or ""):
            a.reject(node, _text(node), "the sed program writes a file (w/W) or runs a command (e)")
            return


_SED_COMMAND: Final = re.compile(
    r"(?:^|[;{}\n])\s*(?:[0-9$]+|/(?:[^/\\]|\\.)*/)?(?:,\s*(?:[0-9$]+|/(?:[^/\\]|\\.)*/))?"
    r"\s*!?\s*[wWe](?:\s|$)"
)
_SED_SUBST: Final = re.compile(r"s(.)(?:(?!\1)[^\\]|\\.)*\1(?:(?!\1)[^\\]|\\.)*\1([gpiImMe0-9w]*)")


def _sed_writes(script: str) -> bool:
    """``w``/``W`` (write) and ``e`` (execute) commands, and the ``w``/``e`` flags of ``s``."""
    if _SED_COMMAND.search(script):
        return True
    return any(set(m.group(2)) & {"w", "e"} for m in _SED_SUBST.finditer(script))


def _awk(a: _Analyzer, node: Node, args: Sequence[_Word]) -> None:
    values = _values(args)
    if any(v in ("-f", "--file", "-i", "--include", "-l", "--load") or v.startswith(("--file=", "--include="))
           for v in values):  # fmt: skip
        a.reject(node, _text(node), "awk loads a program or extension the analysis cannot see")
        return
    programs = [args[i + 1] for i, v in enumerate(values[:-1]) if v in ("-e", "--source")]
    if not programs:
        i = 0
        while i < len(args) and args[i].value is not None and (args[i].value or "").startswith("-"):
            i += 2 if args[i].value in ("-v", "-F", "--assign", "--field-separator") else 1
        programs = [args[i]] if i < len(args) else []
    if _dynamic(a, node, programs, "the awk program"):
        return
    for program in programs:
        problem = _awk_problem(program.value or "")
        if problem is not None:
            a.reject(node, _text(node), problem)
            return


def _awk_problem(program: str) -> str | None:
    """``system()``, command pipes and output redirections inside an awk program."""
    code = re.sub(r'"(?:[^"\\]|\\.)*"', '""', program)
    if re.search(r"\bsystem\s*\(", code):
        return "the awk program runs commands (system())"
    if re.search(r"\|\s*&?\s*getline", code):
        return "the awk program runs a command into getline"
    for statement in re.finditer(r"\bprintf?\b([^;}\n]*)", code):
        body = statement.group(1)
        while True:
            reduced = re.sub(r"\([^()]*\)", "", body)
            if reduced == body:
                break
            body = reduced
        if ">" in body or "|" in body:
            return "the awk program redirects print output to a file or a command"
    return None


def _dd(a: _Analyzer, node: Node, args: Sequence[_Word]) -> None:
    if any(v.startswith("of=") for v in _values(args)):
        a.reject(node, _text(node), "'dd of=' writes a file")


def _sort(a: _Analyzer, node: Node, args: Sequence[_Word]) -> None:
    if any(v.startswith(("-o", "--output")) for v in _values(args)):
        a.reject(node, _text(node), "'sort -o' writes a file")


def _uniq(a: _Analyzer, node: Node, args: Sequence[_Word]) -> None:
    operands = [v for v in _values(args) if not v.startswith("-") or v == "-"]
    if len(operands) >= 2:
        a.reject(node, _text(node), "'uniq INPUT OUTPUT' writes its second operand")


def _curl(a: _Analyzer, node: Node, args: Sequence[_Word]) -> None:
    long_writes = ("--output", "--remote-name", "--dump-header", "--cookie-jar", "--trace", "--libcurl",
                   "--output-dir", "--create-dirs", "--etag-save", "--hsts", "--alt-svc")  # fmt: skip
    for v in _values(args):
        if v.startswith(long_writes) or _short_has(v, "oODc"):
            a.reject(node, _text(node), f"'curl {v}' writes a file")
            return


def _tar(a: _Analyzer, node: Node, args: Sequence[_Word]) -> None:
    values = _values(args)
    modes = ("--extract", "--get", "--create", "--append", "--update", "--delete", "--concatenate", "--catenate")
    first = values[0] if values else ""
    old_style = bool(first) and not first.startswith("-") and set(first) & set("xcruA")
    if old_style or any(v.startswith(modes) or _short_has(v, "xcruA") for v in values):
        a.reject(node, _text(node), "'tar' extracts or creates files (only listing, -t, is read-only)")


def _unzip(a: _Analyzer, node: Node, args: Sequence[_Word]) -> None:
    if not any(_short_has(v, "lptZv") for v in _values(args)):
        a.reject(node, _text(node), "'unzip' extracts files (only -l, -p, -t, -Z or -v are read-only)")


def _git(a: _Analyzer, node: Node, args: Sequence[_Word]) -> None:
    values = _values(args)
    i = _skip_options(args, frozenset({"-C", "-c", "--git-dir", "--work-tree"}))
    sub = values[i] if i is not None else None
    if sub not in _READ_ONLY_GIT or any(v.startswith("--output") for v in values):
        a.reject(node, _text(node), f"'git {sub or ''}' may write; only read-only subcommands are allowed")


def _yq(a: _Analyzer, node: Node, args: Sequence[_Word]) -> None:
    if any(v in ("-i", "--inplace") or v.startswith("--inplace") for v in _values(args)):
        a.reject(node, _text(node), "'yq -i' edits files in place")


def _source(a: _Analyzer, node: Node, args: Sequence[_Word]) -> None:
    if not args or args[0].value is None:
        a.reject(node, _text(node), "sources a path computed at run time; it cannot be analyzed")


def _trap(a: _Analyzer, node: Node, args: Sequence[_Word]) -> None:
    if not args or args[0].value in ("-p", "-l", "-", ""):
        return
    if args[0].value is None:
        a.reject(node, _text(node), "the trap action is computed at run time; it cannot be analyzed")
    elif len(args) >= 2:
        a.nested(args[0].node, args[0].value, _text(node))


def _mapfile(a: _Analyzer, node: Node, args: Sequence[_Word]) -> None:
    values = _values(args)
    if any(v == "-C" or v.startswith("-C") for v in values):
        a.reject(node, _text(node), "'mapfile -C' runs a callback string as code")
    elif values and "\0" in values:
        a.reject(node, _text(node), "assigns to a name computed at run time; it cannot be analyzed")


def _printf(a: _Analyzer, node: Node, args: Sequence[_Word]) -> None:
    values = _values(args)
    if len(values) >= 2 and values[0] == "-v" and not _SIMPLE_NAME.match(values[1]):
        a.reject(node, _text(node), "'printf -v' assigns to a name computed at run time")


def _read(a: _Analyzer, node: Node, args: Sequence[_Word]) -> None:
    if any(w.value is None for w in args):
        a.reject(node, _text(node), "'read' into a name computed at run time cannot be analyzed")


def _hash(a: _Analyzer, node: Node, args: Sequence[_Word]) -> None:
    if "-p" in _values(args):
        a.reject(node, _text(node), "'hash -p' maps a command name to another program")


_NODE_CHECKS: Final[dict[str, Callable[[_Analyzer, Node], None]]] = {
    "file_redirect": _Analyzer.redirect,
    "command": _Analyzer.command,
    "expansion": _Analyzer.expansion,
    "declaration_command": _Analyzer.declaration,
    "unset_command": _Analyzer.unset,
}
_COMMAND_CHECKS: Final[dict[str, Check]] = {
    "env": _env,
    "nice": _wrapper(frozenset({"-n", "--adjustment"})),
    "nohup": _wrapper(frozenset()),
    "timeout": _wrapper(frozenset({"-s", "--signal", "-k", "--kill-after"}), positional=1),
    "time": _time,
    "command": _command_builtin,
    "builtin": _command_builtin,
    "exec": _exec,
    "stdbuf": _wrapper(frozenset({"-i", "-o", "-e"})),
    "setsid": _wrapper(frozenset()),
    "ionice": _wrapper(frozenset({"-c", "-n"})),
    "coproc": _wrapper(frozenset()),
    "xargs": _xargs,
    "find": _find,
    "sed": _sed,
    "gsed": _sed,
    "awk": _awk,
    "gawk": _awk,
    "mawk": _awk,
    "nawk": _awk,
    "dd": _dd,
    "sort": _sort,
    "uniq": _uniq,
    "curl": _curl,
    "tar": _tar,
    "unzip": _unzip,
    "git": _git,
    "yq": _yq,
    "source": _source,
    ".": _source,
    "trap": _trap,
    "mapfile": _mapfile,
    "readarray": _mapfile,
    "printf": _printf,
    "read": _read,
    "hash": _hash,
}


_CHECKED: Final = WRITERS | CODE_RUNNERS | SHELLS | COMPRESSORS | frozenset(_COMMAND_CHECKS)


def analyze_shell(source: str | bytes) -> ShellAnalysis:
    """Analyze one Bash script; raises :class:`BashAnalyzerUnavailable` without the grammar."""
    data = source.encode("utf-8", "surrogateescape") if isinstance(source, str) else source
    analyzer = _Analyzer()
    analyzer.program(data)
    return ShellAnalysis(tuple(sorted(set(analyzer.found))))
