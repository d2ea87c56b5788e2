#!/usr/bin/env python3
"""Checks the code in the documentation against the code it documents.

The rules are those of the docs' convention:

- every fenced code block names its language;
- a block in c, go, python, js or ts is either an excerpt of an example
  program (its first line a comment naming the file, every following line
  found in that file as one contiguous run) or marked `fragment`;
- `tq SUBCOMMAND --flag` in sh / console blocks and inline code names an
  existing subcommand and flags it accepts; `make TARGET` an existing target;
- every `tq_*` / `TQ_*` name is declared in include/tq.h, or else is one of
  the other tq_* / TQ_* names the project defines: an environment variable
  its code reads (TQ_DATABASE_URL), a Go build tag (tq_intree), a metric of
  `tq serve` (tq_pushed_total); `tq_options_set_*` stands for a family;
- `tq.Name` exists in the binding of the block's language (in inline code:
  of the binding the document is about, else of any binding), and methods
  called on tq objects exist on some class or type of that binding. A
  receiver is a tq object when it is named queue or task (or q, in Go), or
  when the block binds it from a call declared to return a tq class, or
  declares it with a tq type (see bound_tq_objects): `json.dumps(`,
  `fmt.Println(`, `console.log(` and a list's `.append(` are never checked;
- an excerpt's file belongs to an example program that `make test-examples`
  runs (read from its dry run), and it runs every example program under
  examples/.

Prints `FILE:LINE: problem` for each problem and exits 1 when there is any.
Standard library only.

    python3 tests/docs/check_docs.py [--root DIR] [--tq-binary PATH] [FILE...]
"""

import argparse
import ast
import os
import re
import shlex
import subprocess
import sys
import tempfile
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

EXCERPT_LANGUAGES = {"c", "go", "python", "js", "ts"}
SHELL_LANGUAGES = {"sh", "console"}
# The comment that opens an excerpt, by language.
SLASHES_HEADER = re.compile(r"^// (examples/\S+)$")
EXCERPT_HEADER = {
    "c": SLASHES_HEADER,
    "go": SLASHES_HEADER,
    "js": SLASHES_HEADER,
    "ts": SLASHES_HEADER,
    "python": re.compile(r"^# (examples/\S+)$"),
}
# Other names of the checked languages: a block must use the checked name.
LANGUAGE_ALIASES = {
    "h": "c",
    "golang": "go",
    "py": "python",
    "python3": "python",
    "javascript": "js",
    "node": "js",
    "typescript": "ts",
    "bash": "sh",
    "shell": "sh",
    "zsh": "sh",
    "shell-session": "console",
}
# Which binding a block's language speaks.
BINDING_OF_LANGUAGE = {"go": "go", "python": "python", "js": "node", "ts": "node"}
# Which binding a document is about, by where it lives; elsewhere a name in
# inline code may belong to any binding.
BINDING_OF_DOCUMENT = {
    "bindings/go/": "go",
    "examples/go/": "go",
    "bindings/python/": "python",
    "examples/python/": "python",
    "bindings/node/": "node",
    "examples/node/": "node",
}
# Receivers taken for tq objects wherever they appear (the names the docs use
# for a queue and a task), besides the variables a block binds from tq calls;
# in Go, q is the queue too.
CONVENTIONAL_TQ_OBJECTS = {"queue", "task"}
CONVENTIONAL_GO_OBJECTS = {"q"}


def conventional_objects(language):
    return CONVENTIONAL_TQ_OBJECTS | (CONVENTIONAL_GO_OBJECTS if language == "go" else set())


C_NAME = re.compile(r"\b(?:tq|TQ)_[A-Za-z][A-Za-z0-9_]*\b")  # a file name such as tq_0.3.0_amd64.deb is none
PACKAGE_NAME = re.compile(r"(?<![\w./-])tq\.([A-Za-z_][A-Za-z0-9_]*)")
# `tq.h`, `tq.pc`: file names, not package members.
FILE_SUFFIXES = {"h", "pc", "map", "so", "a", "db", "go", "py", "js", "ts", "json", "toml", "md", "in"}
# What an example program's file (not a Go one: a folder) ends with.
PROGRAM_SUFFIXES = {".c", ".py", ".js", ".ts"}
COMMAND_PREFIXES = {"env", "exec", "time", "nohup", "sudo", "command"}
PLACEHOLDER = re.compile(r"[A-Z][A-Z_]*|\.\.\.|<[^>]*>")
METHOD_CALL = re.compile(r"(?<![\w.])([A-Za-z_][A-Za-z0-9_]*)\s*\??\.\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(")


@dataclass
class Problem:
    path: str
    line: int
    message: str

    def __str__(self):
        return f"{self.path}:{self.line}: {self.message}"


@dataclass
class Binding:
    """What one language binding exports: package-level names and methods."""

    names: set = field(default_factory=set)
    methods: set = field(default_factory=set)
    # Classes / types with methods, and the methods and package functions
    # whose result is (or holds) one: what a variable bound from a call is.
    types: set = field(default_factory=set)
    returning_objects: set = field(default_factory=set)
    returns: dict = field(default_factory=dict)  # method or function -> its result's type text
    # Go: each type's methods and fields, those of embedded types included.
    members: dict = field(default_factory=dict)

    def finish(self):
        self.returning_objects = {
            name for name, result in self.returns.items() if set(re.findall(r"\w+", result)) & self.types
        }
        return self


@dataclass
class Command:
    """A `tq` subcommand (or the command itself): its flags and subcommands."""

    flags: set = field(default_factory=set)
    subcommands: dict = field(default_factory=dict)


# ---------------------------------------------------------------- the names


def strip_c_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def c_names(root):
    """Every tq_* / TQ_* identifier in include/tq.h outside comments: its
    functions, types, enum constants and macros."""
    header = (root / "include" / "tq.h").read_text()
    return set(C_NAME.findall(strip_c_comments(header)))


# Folders of built or fetched files, never searched.
UNSEARCHED = {".git", "target", "build", "node_modules", "__pycache__"}


def source_files(folder):
    """Every file under folder, but not under UNSEARCHED folders."""
    for parent, folders, names in os.walk(folder):
        folders[:] = sorted(f for f in folders if f not in UNSEARCHED)
        for name in sorted(names):
            yield Path(parent) / name


# How code reads or sets an environment variable: env::var("TQ_X"),
# os.Getenv("TQ_X"), os.environ["TQ_X"], {"TQ_X": ...}, "TQ_X=" + ...,
# process.env.TQ_X, $TQ_X / ${TQ_X} in shell.
ENVIRONMENT_USE = re.compile(
    r"""(?:\b(?:var|var_os|remove_var|set_var|env|getenv|Getenv|LookupEnv|Setenv|Unsetenv|get|pop|setdefault)\s*\(\s*["'](TQ_\w+)["']"""
    r"""|environ\[\s*["'](TQ_\w+)["']|["'](TQ_\w+)["']\s*:|["'](TQ_\w+)="""
    r"""|process\.env\.(TQ_\w+)|process\.env\[\s*["'](TQ_\w+)["']|\$\{?(TQ_\w+))"""
)


def environment_variables(root):
    """TQ_* environment variables the project's code or Makefile reads or sets
    (TQ_DATABASE_URL, TQ_TASK_ID): the docs may name them though tq.h
    declares no such name."""
    found = set()
    for folder in ("src", "cli", "bindings", "examples", "bench", "tests", ".ci"):
        for path in source_files(root / folder):
            if path.suffix in {".rs", ".go", ".py", ".js", ".ts", ".sh", ""} and not path.is_relative_to(
                root / "tests" / "docs"
            ):
                text = path.read_text(errors="replace")
                for match in ENVIRONMENT_USE.finditer(text):
                    found.update(name for name in match.groups() if name)
                if path.suffix in {".sh", ""}:  # TQ_X=value command
                    found.update(re.findall(r"(?m)(?:^|\s)(TQ_[A-Z0-9_]+)=", text))
    makefile = (root / "Makefile").read_text()
    found.update(re.findall(r"\b(TQ_[A-Z0-9_]+)\s*[?:+]?=", makefile))
    found.update(re.findall(r"\$[({]?(TQ_[A-Z0-9_]+)", makefile))
    return found


def go_build_tags(root):
    """The build tags of the Go binding and examples (`tq_intree`)."""
    tags = set()
    for folder in ("bindings/go", "examples/go"):
        for path in (p for p in source_files(root / folder) if p.suffix == ".go"):
            for line in path.read_text().splitlines():
                if line.startswith("//go:build"):
                    tags.update(re.findall(r"\w+", line[len("//go:build") :]))
    return tags


def metric_names(binary):
    """The metrics `tq serve` exports at /metrics (tq_tasks, tq_pushed_total...),
    read from a server on a loopback port over a scratch queue file."""
    with tempfile.TemporaryDirectory(prefix="check-docs-") as scratch:
        file = str(Path(scratch) / "metrics.db")
        subprocess.run([str(binary), "push", file, "{}"], capture_output=True, timeout=30, check=True)
        server = subprocess.Popen(
            [str(binary), "serve", file, "--listen", "127.0.0.1:0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            banner = server.stdout.readline()
            address = re.search(r"http://(127\.0\.0\.1:\d+)", banner)
            if not address:
                raise RuntimeError(f"tq serve printed no address: {banner!r}")
            direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback, never a proxy
            with direct.open(f"http://{address.group(1)}/metrics", timeout=30) as answer:
                body = answer.read().decode()
        finally:
            server.terminate()
            server.wait(timeout=30)
            server.stdout.close()
    names = set()
    for line in body.splitlines():
        if line.startswith("# TYPE "):
            names.add(line.split()[2])
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


def makefile_targets(makefile):
    """The explicit targets of a Makefile (not pattern rules, not variables)."""
    targets = set()
    rule = re.compile(r"^([^\s#:=$][^:=#]*?)\s*::?(?!=)")
    for line in makefile.read_text().splitlines():
        if line.startswith("\t"):
            continue
        match = rule.match(line)
        if match:
            for target in match.group(1).split():
                if "%" not in target and not target.startswith("."):
                    targets.add(target)
    return targets


def example_programs_run(root):
    """The example programs `make test-examples` runs, read from its dry run
    as if nothing were built yet (make -n -B): every word of a command that
    names, from the folder the command runs in, a C, Python or JavaScript
    file under examples/ or a Go main package's folder there. Returns
    (programs, None), or (None, why not)."""
    environment = {k: v for k, v in os.environ.items() if k not in {"MAKEFLAGS", "MFLAGS", "MAKELEVEL"}}
    try:
        result = subprocess.run(
            ["make", "-n", "-B", "-w", "-C", str(root), "test-examples"],
            capture_output=True,
            text=True,
            timeout=60,
            env=environment,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return None, f"make -n test-examples: {error}"
    if result.returncode != 0:
        return None, f"make -n test-examples failed: {result.stderr.strip().splitlines()[-1:]}"
    examples = root / "examples"
    programs, folders = set(), [root]
    for line in result.stdout.splitlines():
        moved = re.match(r"^make(?:\[\d+\])?: (Entering|Leaving) directory '(.*)'$", line)
        if moved:
            if moved.group(1) == "Entering":
                folders.append(Path(moved.group(2)))
            elif len(folders) > 1:
                folders.pop()
            continue
        folder = folders[-1]
        words = line.split()
        for index, word in enumerate(words):
            word = word.strip("'\"")
            if index > 0 and words[index - 1] == "cd":
                folder = folder / word
                continue
            path = Path(os.path.normpath(folder / word))
            if not path.is_relative_to(examples):
                continue
            if (path.is_file() and path.suffix in PROGRAM_SUFFIXES) or (path / "main.go").is_file():
                programs.add(str(path.relative_to(root)))
    return programs, None


def tq_commands(binary):
    """The tq command's subcommands and their flags, from --help."""

    def help_of(words):
        result = subprocess.run(
            [str(binary), *words, "--help"], capture_output=True, text=True, timeout=30, check=True
        )
        return re.sub(r"\x1b\[[0-9;]*m", "", result.stdout)  # colours, were they forced

    def parse(words):
        text = help_of(words)
        command = Command()
        section = None
        for line in text.splitlines():
            if line and not line.startswith(" "):
                section = line.rstrip(":").strip()
                continue
            if section == "Commands":
                match = re.match(r"^  ([a-z][a-z0-9-]*)\s", line + " ")
                if match and match.group(1) != "help":
                    command.subcommands[match.group(1)] = None
            elif section == "Options":
                # `  -j, --jobs <N>`, `  -q`, `      --json`; a wrapped
                # description is indented further.
                match = re.match(r"^  (-[A-Za-z0-9])(?:, (--[a-z0-9][a-z0-9-]*))?\b|^      (--[a-z0-9][a-z0-9-]*)", line)
                if match:
                    command.flags.update(flag for flag in match.groups() if flag)
        for name in list(command.subcommands):
            command.subcommands[name] = parse([*words, name])
        return command

    return parse([])


def go_binding(root):
    """Exported names and methods of package tq in bindings/go (not tests)."""
    binding = Binding()
    own, embedded = {}, {}
    for path in sorted((root / "bindings" / "go").glob("*.go")):
        if path.name.endswith("_test.go"):
            continue
        text = path.read_text()
        structs = re.findall(r"^type\s+(\w+)\s+struct\s*\{[ \t]*\n(.*?)^\}", text, flags=re.M | re.S)
        structs += re.findall(r"^type\s+(\w+)\s+struct\s*\{([^\n]*)\}", text, flags=re.M)
        for kind, body in structs:
            body = "\n".join("\t" + part.strip() for part in body.split(";")) if "\n" not in body else body
            for line in body.splitlines():
                fields = re.match(r"^\t(\w+(?:\s*,\s*\w+)*)\s+[^\s/]", line)
                if fields:
                    own.setdefault(kind, set()).update(n for n in re.split(r"\s*,\s*", fields.group(1)) if n[:1].isupper())
                embed = re.match(r"^\t\*?(\w+)\s*(?://.*)?$", line)
                if embed:
                    embedded.setdefault(kind, set()).add(embed.group(1))
        # Methods: func (r *T) Name(...) RESULT {; interface members: \tName(...
        for receiver, name, result in re.findall(
            r"^func\s*\(\s*\w*\s*\*?(\w+)[^)]*\)\s*([A-Z]\w*)\s*\((?:[^()]|\([^()]*\))*\)\s*([^{\n]*)", text, flags=re.M
        ):
            binding.methods.add(name)
            binding.types.add(receiver)
            own.setdefault(receiver, set()).add(name)
            binding.returns[name] = binding.returns.get(name, "") + " " + result
        for kind, body in re.findall(r"^type\s+([A-Z]\w*)\s+interface\s*\{[ \t]*\n(.*?)^\}", text, flags=re.M | re.S):
            binding.types.add(kind)
            binding.methods.update(re.findall(r"^\s+([A-Z]\w*)\s*\(", body, flags=re.M))
        for name, result in re.findall(
            r"^func\s+([A-Z]\w*)\s*(?:\[[^\]]*\])?\((?:[^()]|\([^()]*\))*\)\s*([^{\n]*)", text, flags=re.M
        ):
            binding.names.add(name)
            binding.returns["tq." + name] = result
        binding.names.update(re.findall(r"^(?:type|const|var)\s+([A-Z]\w*)", text, flags=re.M))
        for block in re.findall(r"^(?:type|const|var)\s*\((.*?)^\)", text, flags=re.M | re.S):
            for line in block.splitlines():
                match = re.match(r"^\t([A-Za-z_]\w*(?:\s*,\s*\w+)*)", line)
                if match:
                    binding.names.update(n for n in re.split(r"\s*,\s*", match.group(1)) if n[:1].isupper())
    binding.types = {t for t in binding.types if t[:1].isupper()}

    def members_of(kind, seen=()):
        found = set(own.get(kind, ()))
        for inner in embedded.get(kind, ()):
            if inner not in seen:
                found |= members_of(inner, (*seen, kind))
        return found

    binding.members = {kind: members_of(kind) for kind in set(own) | set(embedded) if kind[:1].isupper()}
    return binding.finish()


def python_binding(root):
    """Public names of the tq package (bound in its __init__.py) and the
    methods of its classes, read with ast: importing the package would need
    libtq loaded."""
    package = root / "bindings" / "python" / "tq"
    binding = Binding()
    tree = ast.parse((package / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            binding.names.update(alias.asname or alias.name for alias in node.names)
            if node.level == 1 and node.module:  # from .errors import ...: tq.errors is bound too
                binding.names.add(node.module.split(".")[0])
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            binding.names.add(node.name)
        elif isinstance(node, ast.Assign):
            binding.names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            binding.names.add(node.target.id)
    binding.names = {name for name in binding.names if not name.startswith("_") or name == "__version__"}
    for path in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                members = [m for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
                if members and not node.name.startswith("_"):
                    binding.types.add(node.name)
                binding.returns["tq." + node.name] = node.name  # calling a class makes one
                for member in members:
                    binding.methods.add(member.name)
                    if member.returns is not None:
                        binding.returns[member.name] = binding.returns.get(member.name, "") + " " + ast.unparse(member.returns)
    return binding.finish()


def node_binding(root):
    """Exports and class / interface members of bindings/node/index.d.ts."""
    text = (root / "bindings" / "node" / "index.d.ts").read_text()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    binding = Binding()
    binding.names.update(
        re.findall(
            r"^export\s+(?:declare\s+)?(?:abstract\s+)?(?:const|let|function|class|interface|type|enum|namespace)\s+([A-Za-z_$][\w$]*)",
            text,
            flags=re.M,
        )
    )
    for names in re.findall(r"^export\s*\{([^}]*)\}", text, flags=re.M):
        binding.names.update(part.split(" as ")[-1].strip() for part in names.split(",") if part.strip())
    bodies = re.findall(r"^export\s+(?:declare\s+)?(class|interface)\s+(\w+)[^{\n]*\{[ \t]*\n(.*?)^\}", text, flags=re.M | re.S)
    bodies += re.findall(r"^export\s+(?:declare\s+)?(class|interface)\s+(\w+)[^{\n]*\{([^\n]*)\}", text, flags=re.M)
    for kind, name, body in bodies:
        members = re.findall(
            r"^\s+(?:static\s+|readonly\s+|async\s+|get\s+|set\s+)*([A-Za-z_$][\w$]*)\s*\??\s*(?:<[^>(]*>)?\s*\((?:[^()]|\([^()]*\))*\)\s*:?\s*([^;\n]*)",
            body,
            flags=re.M,
        )
        if kind == "class":
            binding.types.add(name)
            binding.returns["tq." + name] = name  # new tq.Queue(...)
        for member, result in members:
            if member != "constructor":
                binding.methods.add(member)
                binding.returns[member] = binding.returns.get(member, "") + " " + result
    for name, result in re.findall(r"^export\s+(?:declare\s+)?function\s+(\w+)[^(]*\((?:[^()]|\([^()]*\))*\)\s*:\s*([^;\n]*)", text, flags=re.M):
        binding.returns["tq." + name] = result
    return binding.finish()


@dataclass
class Names:
    c: set
    commands: Command
    targets: dict
    bindings: dict
    example_programs: set  # None when make could not say
    example_programs_unknown: str  # why not


def collect_names(root, binary):
    makefile = root / "Makefile"
    targets = {".": makefile_targets(makefile)}
    for sub in source_files(root):
        if sub.name == "Makefile" and sub.parent != root:
            targets[str(sub.parent.relative_to(root))] = makefile_targets(sub)
    programs, unknown = example_programs_run(root)
    commands = tq_commands(binary)
    metrics = metric_names(binary) if "serve" in commands.subcommands else set()
    return Names(
        c=c_names(root) | environment_variables(root) | go_build_tags(root) | metrics,
        commands=commands,
        targets=targets,
        bindings={"go": go_binding(root), "python": python_binding(root), "node": node_binding(root)},
        example_programs=programs,
        example_programs_unknown=unknown,
    )


# ------------------------------------------------------------ the markdown


@dataclass
class Block:
    line: int  # of the opening fence
    info: str
    lines: list  # the contents, fence indentation removed

    @property
    def language(self):
        return self.info.split()[0] if self.info.split() else ""

    @property
    def is_fragment(self):
        words = self.info.split()
        return len(words) > 1 and words[1] == "fragment"


@dataclass
class Span:
    line: int  # where the span starts
    text: str


def parse_markdown(text):
    """The fenced blocks and the inline code spans of prose."""
    lines = text.splitlines()
    blocks, spans = [], []
    # Any indentation: a fence in a nested list item sits deeper than 3 spaces.
    fence = re.compile(r"^( *)(`{3,}|~{3,})(.*)$")
    prose = []  # (line number, text) of the current paragraph run

    def flush():
        spans.extend(inline_spans(prose))
        prose.clear()

    number = 0
    while number < len(lines):
        match = fence.match(lines[number])
        if match and not (match.group(2)[0] == "`" and "`" in match.group(3)):
            flush()
            indent, marker, info = len(match.group(1)), match.group(2), match.group(3).strip()
            start, contents = number + 1, []
            number += 1
            closing = re.compile(rf"^ *{re.escape(marker[0])}{{{len(marker)},}}\s*$")
            while number < len(lines) and not closing.match(lines[number]):
                line = lines[number]
                removed = len(line) - len(line.lstrip(" "))
                contents.append(line[min(indent, removed) :])
                number += 1
            blocks.append(Block(start, info, contents))
            number += 1
            continue
        if lines[number].strip():
            prose.append((number + 1, lines[number]))
        else:
            flush()
        number += 1
    flush()
    return blocks, spans


def inline_spans(paragraph):
    """Code spans of one paragraph: a run of n backticks up to the next run of
    exactly n; a span may cross line breaks."""
    if not paragraph:
        return []
    text = "\n".join(line for _, line in paragraph)
    starts = []
    offset = 0
    for number, line in paragraph:
        starts.append((offset, number))
        offset += len(line) + 1

    def line_at(position):
        found = paragraph[0][0]
        for begin, number in starts:
            if begin <= position:
                found = number
        return found

    spans = []
    runs = [(m.start(), m.end()) for m in re.finditer(r"(?<!\\)`+", text)]
    index = 0
    while index < len(runs):
        begin, end = runs[index]
        width = end - begin
        for later in range(index + 1, len(runs)):
            if runs[later][1] - runs[later][0] == width:
                content = text[end : runs[later][0]]
                if content[:1] in " \n" and content[-1:] in " \n" and content.strip():
                    content = content[1:-1]
                spans.append(Span(line_at(begin), content))
                index = later
                break
        index += 1
    return spans


# -------------------------------------------------------------- the checks


class Checker:
    def __init__(self, root, names):
        self.root = root
        self.names = names
        self.problems = []

    def problem(self, path, line, message):
        self.problems.append(Problem(path, line, message))

    def check_file(self, relative):
        if not (self.root / relative).is_file():
            self.problem(relative, 1, "no such document")
            return
        text = (self.root / relative).read_text()
        blocks, spans = parse_markdown(text)
        for block in blocks:
            self.check_block(relative, block)
        document_binding = next((b for prefix, b in BINDING_OF_DOCUMENT.items() if relative.startswith(prefix)), None)
        for span in spans:
            self.check_span(relative, span, document_binding)

    # Blocks.

    def check_block(self, path, block):
        language = block.language
        if not language:
            self.problem(path, block.line, "code block without a language (```c, ```sh, ```text...)")
            return
        if language in LANGUAGE_ALIASES:
            self.problem(path, block.line, f"```{language}: write ```{LANGUAGE_ALIASES[language]}, the name the checks know")
            return
        if language in EXCERPT_LANGUAGES:
            header = EXCERPT_HEADER[language].match(block.lines[0].rstrip()) if block.lines else None
            if header and block.is_fragment:
                self.problem(path, block.line, f"```{language} fragment block opens with an excerpt's file name: one or the other")
            elif header:
                self.check_excerpt(path, block, header.group(1))
            elif not block.is_fragment:
                self.problem(
                    path,
                    block.line,
                    f"```{language} block is neither an excerpt (first line "
                    f"{'#' if language == 'python' else '//'} examples/FILE) nor marked ```{language} fragment",
                )
            self.check_code(path, block, language)
        elif language in SHELL_LANGUAGES:
            self.check_shell_block(path, block)

    def check_excerpt(self, path, block, program):
        line = block.line + 1
        if os.path.normpath(program) != program:
            self.problem(path, line, f"{program}: name the file by its plain path from the repository root")
            return
        target = self.root / program
        if not target.is_file():
            self.problem(path, line, f"excerpt of {program}, which does not exist")
            return
        if not self.is_example_program(program):
            self.problem(path, line, f"{program} is not part of an example program `make test-examples` runs")
        excerpt = [text.rstrip() for text in block.lines[1:]]
        if not excerpt:
            self.problem(path, line, f"excerpt of {program} has no lines")
            return
        source = [text.rstrip() for text in target.read_text().splitlines()]
        if any(source[i : i + len(excerpt)] == excerpt for i in range(len(source) - len(excerpt) + 1)):
            return
        # Say where it stops matching: the longest prefix found anywhere.
        best, where = 0, None
        for i in range(len(source)):
            n = 0
            while n < len(excerpt) and i + n < len(source) and source[i + n] == excerpt[n]:
                n += 1
            if n > best:
                best, where = n, i
        if where is None:
            self.problem(path, line + 1, f"excerpt of {program}: this line is not in the file")
            return
        matched = f"excerpt of {program} no longer matches: lines {where + 1}-{where + best} match"
        if where + best < len(source):
            self.problem(path, line + 1 + best, f"{matched}, then the file has {source[where + best]!r}")
        else:
            self.problem(path, line + 1 + best, f"{matched}, then the file ends")

    def is_example_program(self, program):
        # When make cannot say (reported once), the programs on disk.
        listed = self.names.example_programs
        for entry in example_programs_on_disk(self.root) if listed is None else listed:
            entry = entry.rstrip("/")
            if program == entry or program.startswith(entry + "/"):
                return True
        return False

    def check_code(self, path, block, language):
        binding_name = BINDING_OF_LANGUAGE.get(language)
        binding = self.names.bindings.get(binding_name)
        tq_objects = bound_tq_objects("\n".join(block.lines), language, binding) if binding else set()
        for offset, text in enumerate(block.lines):
            line = block.line + 1 + offset
            self.check_c_names(path, line, text)
            if binding is not None:
                self.check_package_names(path, line, text, [binding_name])
                for name, _ in imported_names(text, language):
                    if name not in binding.names:
                        self.problem(path, line, f"tq.{name} is not exported by the {binding_name} binding")
                self.check_methods(path, line, text, [binding_name], tq_objects)
                if binding_name == "go":
                    self.check_go_members(path, line, text)

    def check_c_names(self, path, line, text):
        for match in C_NAME.finditer(text):
            name = match.group(0)
            if name in self.names.c:
                continue
            # `tq_options_set_*`: a family of names, of which one must exist.
            if name.endswith("_") and text[match.end() : match.end() + 1] == "*":
                if any(known.startswith(name) for known in self.names.c):
                    continue
                self.problem(path, line, f"no name declared in include/tq.h starts with {name}")
                continue
            self.problem(path, line, f"{name} is not declared in include/tq.h")

    def check_package_names(self, path, line, text, bindings):
        for match in PACKAGE_NAME.finditer(text):
            name = match.group(1)
            rest = text[match.end() :]
            if name in FILE_SUFFIXES and not rest.lstrip().startswith("("):
                continue
            if rest.startswith("/"):  # a host name in a path, not a package member
                continue
            if not any(name in self.names.bindings[b].names for b in bindings):
                self.problem(path, line, f"tq.{name} is not exported by the {' or '.join(bindings)} binding")

    def check_go_members(self, path, line, text):
        """`(*Task).Finish`, `(Queue).Close`: a method or field of that type."""
        members = self.names.bindings["go"].members
        for kind, member in re.findall(r"\(\*?([A-Z]\w*)\)\.([A-Z]\w*)", text):
            if kind not in members:
                self.problem(path, line, f"({kind}).{member}: the go binding has no type {kind}")
            elif member not in members[kind]:
                self.problem(path, line, f"({kind}).{member}: {kind} of the go binding has no method or field {member}")

    def check_methods(self, path, line, text, bindings, tq_objects):
        for receiver, method in METHOD_CALL.findall(text):
            if receiver in tq_objects and not any(method in self.names.bindings[b].methods for b in bindings):
                self.problem(path, line, f"{receiver}.{method}(): no class of the {' or '.join(bindings)} binding has {method}")

    # Shell.

    def check_shell_block(self, path, block):
        console = block.language == "console"
        logical, start = "", None
        for offset, text in enumerate(block.lines):
            line = block.line + 1 + offset
            if start is None:
                if text.startswith("$ "):
                    text = text[2:]
                elif console:
                    continue  # output
                start = line
            elif console and text.startswith("> "):
                text = text[2:]
            self.check_c_names(path, line, text)
            if text.rstrip().endswith("\\"):
                logical += text.rstrip()[:-1] + " "
                continue
            self.check_command_line(path, start, logical + text)
            logical, start = "", None
        if start is not None:
            self.check_command_line(path, start, logical)

    def check_command_line(self, path, line, text):
        text = text[2:] if text.startswith("$ ") else text
        # In a usage line, [-q|--queue NAME] offers alternatives: no pipe.
        text = re.sub(r"\[[^\]]*\]", lambda part: part.group(0).replace("|", " "), text)
        try:
            lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()<>")
            lexer.whitespace_split = True
            lexer.commenters = "#"
            tokens = list(lexer)
        except ValueError:  # an unclosed quote: the words as written
            tokens = re.findall(r"[;&|()<>]+|[^\s;&|()<>]+", text.split(" #", 1)[0])
        command = []
        for token in tokens + [";"]:
            if token and set(token) <= set(";&|()<>"):
                self.check_command(path, line, command)
                command = []
            else:
                command.append(token)

    def check_command(self, path, line, words):
        # VAR=value, and commands that run the command that follows.
        while words and (re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]) or words[0] in COMMAND_PREFIXES):
            words = words[1:]
        if not words:
            return
        if words[0] == "tq":
            self.check_tq(path, line, words[1:])
        elif words[0] == "make":
            self.check_make(path, line, words[1:])

    def check_tq(self, path, line, words):
        """`tq [SUBCOMMAND...] [ARGS]`: while the command reached has
        subcommands, a word that is not a flag must name one of them; every
        flag must be one the command reached accepts. An upper-case word
        (COMMAND) stands for any subcommand."""
        command, names = self.names.commands, ["tq"]
        # A usage line's optional parts: [--group-max K].
        words = [word.strip("[]") for word in words if word.strip("[]")]
        for index, word in enumerate(words):
            if word == "--":
                return
            if word == "help" and command.subcommands:  # clap's `tq help [SUBCOMMAND]`
                self.check_tq(path, line, [*names[1:], *words[index + 1 :], "--help"])
                return
            if word.startswith("-"):
                flag = word.split("=", 1)[0] if word.startswith("--") else word[:2]
                if flag not in command.flags:
                    self.problem(path, line, f"`{' '.join(names)}` has no flag {flag}")
            elif command.subcommands:
                if PLACEHOLDER.fullmatch(word):
                    every = set().union(*(c.flags for c in all_commands(command)))
                    for flag in words[index + 1 :]:
                        if flag.startswith("-") and flag.split("=", 1)[0] not in every:
                            self.problem(path, line, f"no tq subcommand has the flag {flag.split('=', 1)[0]}")
                    return
                if word not in command.subcommands:
                    self.problem(path, line, f"tq has no subcommand {' '.join(names[1:] + [word])}")
                    return
                command = command.subcommands[word]
                names.append(word)

    def check_make(self, path, line, words):
        directory, index = ".", 0
        while index < len(words):
            word = words[index]
            if word == "-C" and index + 1 < len(words):
                directory = os.path.normpath(words[index + 1])
                index += 2
                continue
            index += 1
            if word.startswith("-") or "=" in word:
                continue
            targets = self.names.targets.get(directory)
            if targets is None:
                self.problem(path, line, f"`make -C {directory}`: no Makefile there")
                return
            if word not in targets:
                where = "the Makefile" if directory == "." else f"{directory}/Makefile"
                self.problem(path, line, f"make {word}: no such target in {where}")

    # Inline code.

    def check_span(self, path, span, document_binding):
        """Names at the line they are on; a command at the line it starts."""
        text = span.text.replace("\n", " ")
        if re.match(r"^(?:\$ )?(?:[A-Za-z_]\w*=\S*\s+)*(tq\s+\S|make(\s|$))", text):
            self.check_command_line(path, span.line, text)
        bindings = [document_binding] if document_binding else ["go", "python", "node"]
        for offset, piece in enumerate(span.text.split("\n")):
            self.check_c_names(path, span.line + offset, piece)
            self.check_package_names(path, span.line + offset, piece, bindings)
            receivers = conventional_objects("go" if "go" in bindings else None)
            self.check_methods(path, span.line + offset, piece, bindings, receivers)
            if bindings == ["go"]:
                self.check_go_members(path, span.line + offset, piece)


def all_commands(command):
    yield command
    for sub in command.subcommands.values():
        yield from all_commands(sub)


def imported_names(line, language):
    """Names a line imports from the tq package: `from tq import Queue`,
    `const { open } = require('tq')`, `import { open } from 'tq'`."""
    if language == "python":
        match = re.match(r"^\s*from\s+tq\s+import\s+\(?([\w\s,]+)\)?", line)
    elif language in ("js", "ts"):
        match = re.search(r"\{([\w\s,:]+)\}\s*=\s*require\(\s*['\"]tq['\"]\s*\)", line) or re.search(
            r"\bimport\s*\{([\w\s,]+)\}\s*from\s*['\"]tq['\"]", line
        )
    else:
        return []
    if not match:
        return []
    names = []
    for part in match.group(1).split(","):
        words = re.split(r"\s+as\s+|\s*:\s*", part.strip())
        if words[0]:
            names.append((words[0], words[-1]))  # (name in tq, name bound here)
    return names


def without_comments(code, language):
    if language == "python":
        return re.sub(r"(?<![\w'\"])#[^\n]*", "", code)
    code = re.sub(r"/\*.*?\*/", " ", code, flags=re.S)
    return re.sub(r"(?<![:\w'\"])//[^\n]*", "", code)


def bound_tq_objects(code, language, binding):
    """Variables a block binds to tq objects, by a rule that needs no types:

    - assigned (=, :=, const/let/var, `with ... as`, a for loop's variable)
      from a call whose result is a tq object: a package function or class
      (`tq.Open`, `tq.Queue(`, `new tq.Queue(`, a name imported from tq), or
      a method of a tq object whose declared result names one of the
      binding's classes (`queue.pull(` gives a Task; `queue.count(` gives
      nothing);
    - a for loop over such a variable (`for task in tasks`);
    - declared with a tq type: Go `q *tq.Queue` (a var or a parameter),
      Python / TypeScript `queue: tq.Queue`.

    The conventional names (CONVENTIONAL_TQ_OBJECTS) count from the start."""
    code = without_comments(code, language)
    objects = set(conventional_objects(language))
    aliases = {bound: name for line in code.splitlines() for name, bound in imported_names(line, language)}
    prefix = r"(?:await\s+|new\s+|&)?"
    call = rf"{prefix}(\w+)(?:\s*\??\.\s*(\w+))?\s*\("

    def gives_object(root, member):
        if not member:  # a bare call: an imported class or function
            return root in aliases and "tq." + aliases[root] in binding.returning_objects
        if root == "tq":
            return "tq." + member in binding.returning_objects
        return root in objects and member in binding.returning_objects

    statements = [
        # x = tq.Open(...), x, err := q.Pull(...), const x = await queue.pull()
        rf"(?:\b(?:const|let|var)\s+)?(\w+)(?:\s*,\s*\w+)*\s*(?::=|=(?![=>]))\s*{call}",
        # with tq.Queue(...) as x
        rf"\bwith\s+{call}[^\n]*?\bas\s+(?P<target>\w+)",
        # for task in queue.pull_many(...), for (const task of queue.tasks()), for _, t := range q.PullBatch(...)
        rf"\bfor\s+(\w+)\s+in\s+{call}",
        rf"\bfor\s*(?:await\s*)?\(\s*(?:const|let|var)\s+(\w+)\s+of\s+{call}",
        rf"\bfor\s+(?:\w+\s*,\s*)?(\w+)\s*:=\s*range\s+{call}",
    ]
    loops_over_variables = [
        r"\bfor\s+(\w+)\s+in\s+(\w+)\s*:",
        r"\bfor\s*(?:await\s*)?\(\s*(?:const|let|var)\s+(\w+)\s+of\s+(\w+)\s*\)",
        r"\bfor\s+(?:\w+\s*,\s*)?(\w+)\s*:=\s*range\s+(\w+)\s*\{",
    ]
    if language == "go":
        typed = r"(?:\bvar\s+|[(,]\s*)(\w+)\s+(?:\[\]|\*)*tq\.(\w+)"
    else:
        typed = r"\b(\w+)\s*:\s*[\"']?tq\.(\w+)"
    for name, kind in re.findall(typed, code):
        if kind in binding.types:
            objects.add(name)
    for _ in range(5):  # task = queue.pull() after queue = tq.Queue(...)
        before = len(objects)
        for pattern in statements:
            for match in re.finditer(pattern, code):
                groups = list(match.groups())
                target = match.group("target") if "target" in match.re.groupindex else groups.pop(0)
                root, member = groups[:2]
                if gives_object(root, member):
                    objects.add(target)
        for pattern in loops_over_variables:
            for target, iterable in re.findall(pattern, code):
                if iterable in objects:
                    objects.add(target)
        if len(objects) == before:
            break
    objects.discard("tq")
    return objects


# ---------------------------------------------------------------- the files


def documents(root):
    """The checked documents, relative to the root, that exist."""
    found = []
    for pattern in ("README.md", "CHANGELOG.md", "docs/*.md", "bindings/*/README.md", "examples/*/README.md"):
        found.extend(sorted(str(p.relative_to(root)) for p in root.glob(pattern) if p.is_file()))
    return found


def example_programs_on_disk(root):
    """Every example program under examples/: a C, Python or JavaScript file
    at the top of a language's folder, or a Go main package's folder."""
    programs = set()
    for path in (root / "examples").glob("*/*"):
        if path.suffix in PROGRAM_SUFFIXES and path.is_file():
            programs.add(str(path.relative_to(root)))
        elif path.is_dir() and (path / "main.go").is_file():
            programs.add(str(path.relative_to(root)))
    return programs


def check_example_list(root, names, checker):
    """Every example program on disk is one `make test-examples` runs."""
    lines = (root / "Makefile").read_text().splitlines()
    line = next((n for n, text in enumerate(lines, 1) if text.startswith("test-examples:")), 1)
    if names.example_programs is None:
        checker.problem("Makefile", line, f"which example programs `make test` runs is unknown: {names.example_programs_unknown}")
        return
    for program in sorted(example_programs_on_disk(root) - names.example_programs):
        checker.problem("Makefile", line, f"{program} is an example program `make test-examples` does not run")


def main(argv=None):
    here = Path(__file__).resolve().parent.parent.parent
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=here, help="the checkout to check (default: this one)")
    parser.add_argument(
        "--tq-binary", type=Path, help="the built tq command (default: ROOT/target/release/tq)"
    )
    parser.add_argument("files", nargs="*", help="documents to check, relative to the root (default: all)")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    binary = args.tq_binary or root / "target" / "release" / "tq"
    if not Path(binary).is_file():
        print(f"check_docs: {binary} does not exist: build it with `make cli`", file=sys.stderr)
        return 2
    names = collect_names(root, binary)
    checker = Checker(root, names)
    check_example_list(root, names, checker)
    files = args.files or documents(root)
    for relative in files:
        checker.check_file(relative)
    order = {path: index for index, path in enumerate(["Makefile", *files])}
    for problem in sorted(checker.problems, key=lambda p: (order.get(p.path, len(order)), p.line)):
        print(problem)
    sys.stdout.flush()  # the problems before the summary, on one terminal
    if checker.problems:
        count = len(checker.problems)
        plural = {True: "", False: "s"}
        print(
            f"check_docs: {count} problem{plural[count == 1]} in {len(files)} document{plural[len(files) == 1]}",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
