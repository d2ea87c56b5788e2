"""The shape of the library's source, as docs/internals.md promises it: no
file in src/ over 1,000 lines, no function over 60 lines without a
`// Long:` comment above it saying why, no circle of references between
files of different folders, a source map in docs/internals.md that lists
every file of src/ and nothing else, and every "Design:" pointer of a
module naming a section that exists. Each check also runs on a small
made-up tree, so that it is seen to fail.
"""

import re
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent.parent
SRC = REPOSITORY / "src"
INTERNALS = REPOSITORY / "docs" / "internals.md"

MAX_FILE_LINES = 1000
MAX_FUNCTION_LINES = 60

FN = re.compile(r'^(\s*)(?:pub(?:\([^)]*\))? )?(?:const )?(?:unsafe )?(?:extern "C" )?fn (\w+)')
MOD = re.compile(r"^\s*(?:pub(?:\([^)]*\))? )?mod (\w+);", re.M)
REEXPORT = re.compile(r"^pub use (\w+)::(?:\{([^}]*)\}|(\w+));", re.M)
PATH = re.compile(r"\b(crate|super)((?:::\w+)+)")
GROUP = re.compile(r"\b(crate|super)((?:::\w+)*)::\{([^{}]*)\}")
DESIGN = re.compile(r'Design: `docs/internals\.md`, "([^"]+)"')
MAP_HEADING = "## Source map"


def rust_files(src):
    return sorted(src.rglob("*.rs"))


def name_of(path, src):
    return path.relative_to(src.parent).as_posix()


def library_lines(path):
    """The lines of a file before its inline module of unit tests."""
    lines = path.read_text().split("\n")
    for i, line in enumerate(lines[:-1]):
        if line == "#[cfg(test)]" and re.match(r"mod \w+ \{", lines[i + 1]):
            return lines[:i]
    return lines


def long_files(src):
    found = []
    for path in rust_files(src):
        count = len(path.read_text().rstrip("\n").split("\n"))
        if count > MAX_FILE_LINES:
            found.append(f"{name_of(path, src)}: {count} lines")
    return found


def functions(lines):
    """(name, first line, length in lines, whether a `// Long:` comment is
    above it) of each function defined at the outside of another."""
    i = 0
    while i < len(lines):
        match = FN.match(lines[i])
        if not match:
            i += 1
            continue
        indent, name = match.groups()
        j = i
        while j < len(lines) and "{" not in lines[j] and not lines[j].rstrip().endswith(";"):
            j += 1
        if j == len(lines) or "{" not in lines[j]:
            i = j + 1
            continue
        end = j
        if lines[j].count("{") != lines[j].count("}"):
            end = j + 1
            while end < len(lines) and lines[end] != indent + "}":
                end += 1
        above = i
        while above > 0 and lines[above - 1].strip().startswith(("//", "#[")):
            above -= 1
        reason = any(line.strip().startswith("// Long:") for line in lines[above:i])
        yield name, i + 1, end - i + 1, reason
        i = end + 1


def files_only_for_tests(src):
    """The files of modules declared under `#[cfg(test)]`."""
    found = set()
    for path in rust_files(src):
        folder = path.parent if path.name in ("mod.rs", "lib.rs") else path.with_suffix("")
        for name in re.findall(r"^#\[cfg\(test\)\]\n(?:pub(?:\([^)]*\))? )?mod (\w+);", path.read_text(), re.M):
            found |= {folder / f"{name}.rs", folder / name / "mod.rs"}
    return found


def long_functions(src):
    found = []
    tests_only = files_only_for_tests(src)
    for path in rust_files(src):
        if path in tests_only:
            continue
        for name, line, length, reason in functions(library_lines(path)):
            if length > MAX_FUNCTION_LINES and not reason:
                found.append(f"{name_of(path, src)}:{line}: fn {name} is {length} lines")
    return found


def code_of(path):
    """The file's text before its unit tests, without comments (line
    comments only: the library has no block comments) and without string
    literals."""
    text = re.sub(r"//[^\n]*", "", "\n".join(library_lines(path)))
    return re.sub(r'"(?:\\.|[^"\\])*"', '""', text)


def module_file(src, parts):
    """The file of the longest prefix of `parts` that is a module."""
    found = None
    for n in range(1, len(parts) + 1):
        base = src.joinpath(*parts[:n])
        for candidate in (base.with_suffix(".rs"), base / "mod.rs"):
            if candidate.exists():
                found = candidate
    return found


def module_parts(src, path):
    """The module path of a file: src/queue/mod.rs is ["queue"]."""
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("mod", "lib"):
        parts.pop()
    return parts


def references(src, path, reexports):
    """The files of src/ that `path` refers to: by `crate::` and `super::`
    paths (grouped `{...}` ones expanded), and by the paths through the
    modules it declares."""
    code = code_of(path)
    here = module_parts(src, path)
    paths = []
    for root, prefix, inner in GROUP.findall(code):
        for item in inner.split(","):
            item = item.strip().split(" as ")[0]
            if item == "self":
                paths.append((root, prefix))
            elif item:
                paths.append((root, prefix + "::" + item))
    code = GROUP.sub("", code)
    paths += PATH.findall(code)
    children = MOD.findall(code)
    for child in children:
        if re.search(rf"\b{child}::", code):
            paths.append(("self", "::" + child))
    found = set()
    for root, rest in paths:
        parts = [p for p in rest.split("::") if p]
        if root == "crate":
            base = []
        elif root == "super":
            base = here[:-1]
            while parts and parts[0] == "super":
                base, parts = base[:-1], parts[1:]
        else:
            base = here
        full = base + parts
        target = module_file(src, full)
        if target is None or target == src / "lib.rs":
            # A name the crate's root re-exports: the module it comes from.
            if full and full[0] in reexports:
                target = module_file(src, [reexports[full[0]]])
        if target is not None and target != path:
            found.add(target)
    return found


def reexports_of(src):
    lib = src / "lib.rs"
    found = {}
    if not lib.exists():
        return found
    for module, names, single in REEXPORT.findall(lib.read_text()):
        for name in (names.split(",") if names else [single]):
            name = name.strip().split(" as ")[-1]
            if name:
                found[name] = module
    return found


def strongly_connected(graph):
    """Tarjan's strongly connected components of {node: {nodes}}."""
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for next_node in graph.get(node, ()):
            if next_node not in index:
                visit(next_node)
                low[node] = min(low[node], low[next_node])
            elif next_node in on_stack:
                low[node] = min(low[node], index[next_node])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            components.append(component)

    for node in graph:
        if node not in index:
            visit(node)
    return components


def circles_across_folders(src):
    reexports = reexports_of(src)
    graph = {path: references(src, path, reexports) for path in rust_files(src)}
    found = []
    for component in strongly_connected(graph):
        folders = {path.parent for path in component}
        if len(folders) > 1:
            found.append(", ".join(sorted(name_of(p, src) for p in component)))
    return found


def source_map(internals):
    """The files named in the source map section of docs/internals.md."""
    text = internals.read_text()
    if MAP_HEADING not in text:
        return None
    section = text.split(MAP_HEADING, 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"`(src/[\w/]+\.rs)`", section))


def source_map_errors(src, internals):
    listed = source_map(internals)
    if listed is None:
        return [f'{internals.name} has no "{MAP_HEADING[3:]}" section']
    actual = {name_of(p, src) for p in rust_files(src)}
    return [f"{name} is not in the source map" for name in sorted(actual - listed)] + [
        f"the source map lists {name}, which does not exist" for name in sorted(listed - actual)
    ]


def design_pointer_errors(src, internals):
    headings = set(re.findall(r"^## (.+)$", internals.read_text(), re.M))
    return [
        f'{name_of(path, src)} points to "{section}", which {internals.name} does not have'
        for path in rust_files(src)
        for section in DESIGN.findall(path.read_text())
        if section not in headings
    ]


# The repository.


def test_no_file_in_src_is_over_1000_lines():
    assert long_files(SRC) == []


def test_no_function_is_over_60_lines_without_a_reason():
    assert long_functions(SRC) == []


def test_no_circle_runs_between_files_of_different_folders():
    assert circles_across_folders(SRC) == []


def test_the_source_map_lists_every_file_of_src_and_no_other():
    assert source_map_errors(SRC, INTERNALS) == []


def test_every_design_pointer_names_a_section_of_the_internals():
    assert design_pointer_errors(SRC, INTERNALS) == []


# Each check on a made-up tree, where it must fail.


def write(root, name, text):
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_long_file_is_reported(tmp_path):
    src = tmp_path / "src"
    write(src, "lib.rs", "mod big;\n")
    write(src, "big.rs", "// line\n" * (MAX_FILE_LINES + 1))
    assert long_files(src) == [f"src/big.rs: {MAX_FILE_LINES + 1} lines"]


def test_a_long_function_is_reported_unless_a_comment_says_why(tmp_path):
    src = tmp_path / "src"
    body = "    let x = 1;\n" * MAX_FUNCTION_LINES
    write(src, "checks.rs", f"fn long_check() {{\n{body}}}\n")
    write(
        src,
        "lib.rs",
        f"#[cfg(test)]\nmod checks;\n\n"
        f"/// Short.\npub fn short() -> u8 {{ 1 }}\n\n/// Long.\nfn long() {{\n{body}}}\n\n"
        f"// Long: one match over every operation.\n/// Excused.\nfn excused() {{\n{body}}}\n\n"
        f"#[cfg(test)]\nmod tests {{\n    fn long_test() {{\n{body}    }}\n}}\n",
    )
    assert long_functions(src) == [f"src/lib.rs:8: fn long is {MAX_FUNCTION_LINES + 2} lines"]


def test_a_circle_between_folders_is_reported_and_one_inside_a_folder_is_not(tmp_path):
    src = tmp_path / "src"
    write(src, "lib.rs", "mod engine;\nmod backend;\nmod a;\nmod b;\npub use engine::Engine;\n")
    write(src, "engine/mod.rs", "mod clock;\nuse crate::backend::Store;\npub struct Engine;\n")
    write(src, "engine/clock.rs", "pub fn now() -> i64 { 0 }\n")
    write(src, "backend/mod.rs", "mod claim;\npub struct Store;\nfn f() { claim::run() }\n")
    write(src, "backend/claim.rs", "use crate::Engine;\npub fn run() {}\n")
    write(src, "a.rs", "use crate::b::B;\npub struct A;\n")
    write(src, "b.rs", "use crate::a::A;\npub struct B;\n")
    assert circles_across_folders(src) == [
        "src/backend/claim.rs, src/backend/mod.rs, src/engine/mod.rs"
    ]
    write(src, "backend/claim.rs", "use crate::engine::{self, clock};\npub fn run() {}\n")
    assert circles_across_folders(src) == [
        "src/backend/claim.rs, src/backend/mod.rs, src/engine/mod.rs"
    ]
    write(src, "backend/claim.rs", "use crate::engine::clock::now;\npub fn run() {}\n")
    assert circles_across_folders(src) == []


def test_a_source_map_missing_a_file_or_naming_a_gone_one_is_reported(tmp_path):
    src = tmp_path / "src"
    write(src, "lib.rs", "mod a;\n")
    write(src, "a.rs", "")
    internals = tmp_path / "internals.md"
    internals.write_text("# x\n\n## Source map\n\n- `src/lib.rs`: the root\n- `src/gone.rs`: gone\n\n## Next\n\n`src/a.rs`\n")
    assert source_map_errors(src, internals) == [
        "src/a.rs is not in the source map",
        "the source map lists src/gone.rs, which does not exist",
    ]
    internals.write_text("# x\n")
    assert source_map_errors(src, internals) == ['internals.md has no "Source map" section']


def test_a_design_pointer_to_a_missing_section_is_reported(tmp_path):
    src = tmp_path / "src"
    write(src, "lib.rs", '//! Design: `docs/internals.md`, "Gone".\n//! Design: `docs/internals.md`, "Here".\n')
    internals = tmp_path / "internals.md"
    internals.write_text("# x\n\n## Here\n")
    assert design_pointer_errors(src, internals) == [
        'src/lib.rs points to "Gone", which internals.md does not have'
    ]
