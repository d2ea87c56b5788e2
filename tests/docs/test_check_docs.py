"""The docs checker on a small repository of its own (fixture/): its README
passes, and each way of going stale fails with the file and line.

fixture/bin/tq stands in for the tq command: it prints the pages under
fixture/bin/help/ in the layout clap prints them.
"""

import contextlib
import io
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
CHECKER = HERE / "check_docs.py"
REPOSITORY = HERE.parent.parent
sys.path.insert(0, str(HERE))
import check_docs  # noqa: E402


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    shutil.copytree(HERE / "fixture", root)
    return root


def run(root):
    """The checker as `make test-docs` runs it, in a process of its own."""
    return subprocess.run(
        [sys.executable, str(CHECKER), "--root", str(root), "--tq-binary", str(root / "bin" / "tq")],
        capture_output=True,
        text=True,
        timeout=60,
    )


def problems(root):
    """What the checker prints on root, run in this process (faster)."""
    output = io.StringIO()
    with contextlib.redirect_stdout(output), contextlib.redirect_stderr(io.StringIO()):
        status = check_docs.main(["--root", str(root), "--tq-binary", str(root / "bin" / "tq")])
    lines = output.getvalue().splitlines()
    assert status == (1 if lines else 0), (status, lines)
    return lines


def edit(path, old, new):
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new))


def line_of(path, needle, occurrence=1):
    """The line number of the occurrence-th line of path containing needle."""
    found = [n for n, line in enumerate(path.read_text().splitlines(), 1) if needle in line]
    assert len(found) >= occurrence, f"{needle!r} in {path}: {found}"
    return found[occurrence - 1]


def where(repo, needle, occurrence=1, document="README.md"):
    return f"{document}:{line_of(repo / document, needle, occurrence)}:"


def at_line(repo, whole, document="README.md"):
    """FILE:LINE: of the line that is exactly whole."""
    lines = (repo / document).read_text().splitlines()
    assert lines.count(whole) == 1, whole
    return f"{document}:{lines.index(whole) + 1}:"


def append(repo, text, document="README.md"):
    path = repo / document
    path.write_text(path.read_text() + text)


def assert_problems(repo, expected):
    """Exactly the expected problems: each a (FILE:LINE:, part of the message)."""
    found = problems(repo)
    unmatched = list(found)
    for location, message in expected:
        match = next((line for line in unmatched if line.startswith(location + " ") and message in line), None)
        assert match is not None, f"no {location} ...{message}... in:\n" + "\n".join(found)
        unmatched.remove(match)
    assert not unmatched, "unexpected:\n" + "\n".join(unmatched)


def test_the_fixture_passes(repo):
    result = run(repo)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""


def test_problems_are_printed_and_the_exit_status_is_1(repo):
    append(repo, "\n`tq_gone`\n")
    result = run(repo)
    assert result.returncode == 1
    assert result.stdout == f"{where(repo, '`tq_gone`')} tq_gone is not declared in include/tq.h\n"
    assert "check_docs: 1 problem in 1 document" in result.stderr


def test_a_missing_tq_command_is_an_error_of_its_own(repo):
    (repo / "bin" / "tq").unlink()
    result = run(repo)
    assert result.returncode == 2
    assert "make cli" in result.stderr


def test_a_block_neither_excerpt_nor_fragment_fails_at_its_fence(repo):
    append(repo, "\nText.\n\n```python\nqueue.push(1)\n```\n\n```c\n// not an example\ntq_close(queue);\n```\n")
    fence = line_of(repo / "README.md", "// not an example") - 1
    assert_problems(
        repo,
        [
            (where(repo, "```python", 3), "```python block is neither an excerpt"),
            (f"README.md:{fence}:", "```c block is neither an excerpt"),
        ],
    )


def test_a_block_without_a_language_fails(repo):
    append(repo, "\n```\nplain\n```\n")
    line = len((repo / "README.md").read_text().splitlines()) - 2
    assert_problems(repo, [(f"README.md:{line}:", "code block without a language")])


def test_an_excerpt_that_no_longer_matches_its_file_fails_at_the_line_that_differs(repo):
    edit(repo / "examples" / "c" / "workers.c", "        tq_finish(queue, task);", "        tq_finish(queue, task); /* done */")
    assert_problems(
        repo, [(where(repo, "        tq_finish(queue, task);"), "excerpt of examples/c/workers.c no longer matches")]
    )


def test_an_excerpt_out_of_order_fails(repo):
    edit(repo / "README.md", "    task = queue.pull(timeout=1)\n    task.finish()\n", "    task.finish()\n    task = queue.pull(timeout=1)\n")
    assert_problems(repo, [(where(repo, "    task.finish()", 1), "excerpt of examples/python/blog_example.py")])


def test_an_excerpt_of_a_missing_file_fails(repo):
    (repo / "examples" / "go" / "workers" / "main.go").unlink()
    header = where(repo, "// examples/go/workers/main.go")
    assert_problems(
        repo,
        [(header, "excerpt of examples/go/workers/main.go, which does not exist")],
    )


def test_an_excerpt_of_a_program_make_test_does_not_run_fails(repo):
    edit(repo / "Makefile", "\tnode examples/node/workers.js jobs.db\n", "")
    assert_problems(
        repo,
        [
            (where(repo, "// examples/node/workers.js"), "examples/node/workers.js is not part of an example program"),
            ("Makefile:10:", "examples/node/workers.js is an example program `make test-examples` does not run"),
        ],
    )


def test_a_program_built_by_a_sub_make_counts_though_it_is_built_already(repo):
    (repo / "examples" / "c" / "workers").write_text("built\n")
    assert problems(repo) == []


def test_a_program_built_by_a_sub_make_counts_and_fails_when_no_longer_built(repo):
    edit(repo / "examples" / "c" / "Makefile", "\tcc -o workers workers.c -ltq\n", "\tcc -o workers -ltq\n")
    assert_problems(
        repo,
        [
            (where(repo, "// examples/c/workers.c"), "examples/c/workers.c is not part of an example program"),
            ("Makefile:10:", "examples/c/workers.c is an example program `make test-examples` does not run"),
        ],
    )


def test_a_removed_c_function_fails_wherever_it_is_named(repo):
    edit(repo / "include" / "tq.h", "enum tq_status tq_finish(tq_queue *queue, tq_task *task);\n", "")
    append(repo, "\nThen `tq_finish(queue, task)`.\n")
    assert_problems(
        repo,
        [
            (where(repo, "        tq_finish(queue, task);"), "tq_finish is not declared in include/tq.h"),
            (where(repo, "`tq_finish(queue, task)`"), "tq_finish is not declared in include/tq.h"),
        ],
    )


def test_a_name_only_in_a_comment_of_the_header_is_not_declared(repo):
    append(repo, "\n`tq_removed_long_ago` and `tq_also_only_in_a_comment`.\n")
    line = where(repo, "tq_removed_long_ago")
    assert_problems(
        repo,
        [(line, "tq_removed_long_ago is not declared"), (line, "tq_also_only_in_a_comment is not declared")],
    )


def test_a_removed_cli_flag_fails(repo):
    edit(repo / "bin" / "help" / "tq-push.txt", "      --priority <N>\n", "")
    assert_problems(
        repo,
        [
            (where(repo, "--priority 10"), "`tq push` has no flag --priority"),
            # A span across lines: at the line the command starts.
            (where(repo, "`tq push"), "`tq push` has no flag --priority"),
        ],
    )


def test_a_removed_short_flag_fails(repo):
    edit(repo / "bin" / "help" / "tq-work.txt", "  -j, --jobs <N>", "      --jobs <N>")
    assert_problems(repo, [(where(repo, "tq work jobs.db -j 4"), "`tq work` has no flag -j")])


def test_a_removed_subcommand_fails(repo):
    edit(repo / "bin" / "help" / "tq.txt", "  work      Run a command once per task\n", "")
    (repo / "bin" / "help" / "tq-work.txt").unlink()
    assert_problems(
        repo,
        [
            (where(repo, "tq work jobs.db -j 4"), "tq has no subcommand work"),
            (where(repo, "`tq work --until-empty`"), "tq has no subcommand work"),
        ],
    )


def test_a_removed_nested_subcommand_fails(repo):
    edit(repo / "bin" / "help" / "tq-schedule.txt", "  list  List the schedules\n", "")
    assert_problems(repo, [(where(repo, "$ tq schedule list"), "tq has no subcommand schedule list")])


def test_a_flag_of_no_subcommand_fails_after_a_placeholder(repo):
    append(repo, "\nSee `tq COMMAND --verbose`.\n")
    assert_problems(repo, [(where(repo, "--verbose"), "no tq subcommand has the flag --verbose")])


def test_a_removed_make_target_fails(repo):
    edit(repo / "Makefile", "test-docs:\n\ttrue\n", "")
    edit(repo / "Makefile", "test: test-docs", "test:")
    assert_problems(repo, [(where(repo, "`make test-docs`"), "make test-docs: no such target in the Makefile")])


def test_a_removed_make_target_fails_in_a_shell_block(repo):
    edit(repo / "Makefile", "lib:\n\ttrue\n", "")
    edit(repo / "Makefile", "all: lib", "all:")
    assert_problems(repo, [(where(repo, "make -C . lib"), "make lib: no such target")])


def test_a_removed_go_method_fails(repo):
    edit(repo / "bindings" / "go" / "tq.go", "func (q *Queue) Pull() (*Task, error) { return &Task{}, nil }\n", "")
    assert_problems(
        repo,
        [
            (where(repo, "pending.Pull()"), "pending.Pull(): no class of the go binding has Pull"),
            (where(repo, "`q.Pull(`"), "q.Pull(): no class of the go or python or node binding has Pull"),
        ],
    )


def test_a_removed_go_name_fails_and_test_files_and_unexported_names_do_not_count(repo):
    edit(repo / "bindings" / "go" / "tq.go", "\tMaxPayloadLen = 1 << 20\n", "")
    append(repo, "\n```go fragment\ntq.OnlyInATest()\ntq.helper()\n```\n")
    assert_problems(
        repo,
        [
            (where(repo, "tq.MaxPayloadLen"), "tq.MaxPayloadLen is not exported by the go binding"),
            (where(repo, "tq.OnlyInATest()"), "tq.OnlyInATest is not exported by the go binding"),
            (where(repo, "tq.helper()"), "tq.helper is not exported by the go binding"),
        ],
    )


def test_a_removed_python_method_fails(repo):
    edit(repo / "bindings" / "python" / "tq" / "queue.py", "    def push(self, payload) -> int:\n        pass\n", "")
    assert_problems(
        repo,
        [
            (where(repo, "    queue.push("), "queue.push(): no class of the python binding has push"),
            (where(repo, "jobs.push("), "jobs.push(): no class of the python binding has push"),
        ],
    )


def test_a_removed_python_name_fails(repo):
    edit(repo / "bindings" / "python" / "tq" / "__init__.py", "from .queue import MAX_PAYLOAD_LEN as max_payload_len\n", "")
    assert_problems(repo, [(where(repo, "tq.max_payload_len"), "tq.max_payload_len is not exported by the python binding")])


def test_a_removed_node_method_fails(repo):
    edit(repo / "bindings" / "node" / "index.d.ts", "  pull(options?: { lease?: number }): Promise<Task | null>;\n", "")
    # `queue.pull(` in the prose still passes: there any binding's pull will do.
    assert_problems(
        repo,
        [
            (where(repo, "await queue.pull()"), "queue.pull(): no class of the node binding has pull"),
            (where(repo, "await jobs.pull("), "jobs.pull(): no class of the node binding has pull"),
        ],
    )


def test_a_method_named_only_in_a_comment_of_the_declarations_does_not_count(repo):
    append(repo, "\n```js fragment\ntask.finishLater();\n```\n")
    assert_problems(repo, [(where(repo, "task.finishLater()"), "no class of the node binding has finishLater")])


def test_calls_on_other_receivers_are_not_checked(repo):
    append(
        repo,
        "\n```python fragment\nresults = []\nresults.append(json.dumps({}))\nos.path.join('a', 'b')\n```\n"
        "\n```go fragment\nlog.Printf(\"%v\", time.Now())\nctx.Done()\n```\n"
        "\n```js fragment\nconst server = http.createServer();\nserver.listen(8080);\nprocess.exit(0);\n```\n",
    )
    assert problems(repo) == []


def test_a_variable_bound_from_a_tq_call_is_checked(repo):
    append(repo, "\n```python fragment\nwith tq.Queue('a.db') as jobs:\n    job = jobs.pull()\n    job.finsh()\n```\n")
    assert_problems(repo, [(where(repo, "job.finsh()"), "job.finsh(): no class of the python binding has finsh")])


def test_an_example_program_make_test_examples_does_not_run_fails(repo):
    (repo / "examples" / "python" / "second.py").write_text("import tq\n")
    (repo / "examples" / "go" / "third").mkdir()
    (repo / "examples" / "go" / "third" / "main.go").write_text("package main\n")
    assert_problems(
        repo,
        [
            ("Makefile:10:", "examples/go/third is an example program `make test-examples` does not run"),
            ("Makefile:10:", "examples/python/second.py is an example program `make test-examples` does not run"),
        ],
    )


def test_the_real_tq_command_is_read_whole():
    """The help of the built tq command parses into its subcommands and
    flags, and `tq serve` gives its metrics (make test-docs builds the
    command first)."""
    binary = REPOSITORY / "target" / "release" / "tq"
    if not binary.is_file():
        pytest.skip(f"{binary} is not built (make cli)")
    commands = check_docs.tq_commands(binary)
    assert {"stats", "push", "list", "work", "schedule", "serve"} <= set(commands.subcommands)
    assert "help" not in commands.subcommands
    assert {"--json", "--help", "--version"} <= commands.flags
    assert {"-j", "--until-empty", "--queue", "--json"} <= commands.subcommands["work"].flags
    assert "add" in commands.subcommands["schedule"].subcommands
    assert "--cron" in commands.subcommands["schedule"].subcommands["add"].flags
    assert {"tq_tasks", "tq_pushed_total", "tq_wal_bytes"} <= check_docs.metric_names(binary)


def test_the_result_of_a_call_is_a_tq_object_only_when_declared_so(repo):
    append(
        repo,
        "\n```python fragment\nwith tq.Queue('a.db') as jobs:\n    n = jobs.push(1)\n    print(n.bit_length())\n"
        "    job = jobs.pull()\n    job.finsh()\n```\n",
    )
    assert_problems(repo, [(where(repo, "job.finsh()"), "job.finsh(): no class of the python binding has finsh")])


def test_a_go_parameter_or_variable_of_a_tq_type_is_checked(repo):
    append(repo, "\n```go fragment\nfunc handle(ctx context.Context, job *tq.Task) {\n\tjob.Finsh()\n}\nvar other *tq.Queue\nother.Pul()\n```\n")
    assert_problems(
        repo,
        [
            (where(repo, "job.Finsh()"), "job.Finsh(): no class of the go binding has Finsh"),
            (where(repo, "other.Pul()"), "other.Pul(): no class of the go binding has Pul"),
        ],
    )


def test_names_imported_from_tq_are_checked_and_bind_objects(repo):
    append(
        repo,
        "\n```python fragment\nfrom tq import Queue, Gone\njobs = Queue('a.db')\njobs.pul()\n```\n"
        "\n```js fragment\nconst { open, gone } = require('tq');\nconst jobs = open('a.db');\njobs.pul();\n```\n",
    )
    assert_problems(
        repo,
        [
            (where(repo, "from tq import Queue, Gone"), "tq.Gone is not exported by the python binding"),
            (where(repo, "jobs.pul()", 1), "jobs.pul(): no class of the python binding has pul"),
            (where(repo, "const { open, gone }"), "tq.gone is not exported by the node binding"),
            (where(repo, "jobs.pul();", 1), "jobs.pul(): no class of the node binding has pul"),
        ],
    )


def test_in_a_document_about_every_binding_a_method_of_any_binding_will_do(repo):
    append(repo, "\nIn Go `q.Pull(ctx)`, in Python `queue.pull(`, in Node `task.finish()`; not `q.Pul(` or `task.fnish(`.\n")
    line = where(repo, "`q.Pul(`")
    assert_problems(
        repo,
        [
            (line, "q.Pul(): no class of the go or python or node binding has Pul"),
            (line, "task.fnish(): no class of the go or python or node binding has fnish"),
        ],
    )


def test_a_binding_s_readme_speaks_of_that_binding_only(repo):
    (repo / "bindings" / "go" / "README.md").write_text("Open with `tq.Open`, pull with `q.Pull(ctx)`, not `tq.open` or `q.pull(`.\n")
    assert_problems(
        repo,
        [
            ("bindings/go/README.md:1:", "tq.open is not exported by the go binding"),
            ("bindings/go/README.md:1:", "q.pull(): no class of the go binding has pull"),
        ],
    )


def test_without_test_examples_that_alone_is_reported(repo):
    edit(repo / "Makefile", "test-examples: example-c\n", "examples-elsewhere: example-c\n")
    edit(repo / "Makefile", "test: test-docs test-examples", "test: test-docs")
    assert_problems(repo, [("Makefile:1:", "which example programs `make test` runs is unknown: make -n test-examples failed")])


def test_an_environment_variable_no_code_reads_fails(repo):
    edit(repo / "cli" / "src" / "main.rs", '"TQ_FIXTURE_URL"', '"TQ_FIXTURE_LOCATION"')
    assert_problems(repo, [(where(repo, "`TQ_FIXTURE_URL`"), "TQ_FIXTURE_URL is not declared in include/tq.h")])


def test_a_family_of_names_fails_when_none_is_left(repo):
    append(repo, "\nThe `tq_push_options_set_*` setters.\n")
    assert_problems(repo, [(where(repo, "`tq_push_options_set_*`"), "no name declared in include/tq.h starts with tq_push_options_set_")])


def test_go_methods_named_with_their_type_are_checked_against_that_type(repo):
    (repo / "bindings" / "go" / "README.md").write_text(
        "`(*Task).ID` (embedded), `(*Task).Queue` (a field), `(*Queue).Pull`\n"
        "`(*Task).Pull`, `(*Job).Finish`\n"
    )
    assert_problems(
        repo,
        [
            ("bindings/go/README.md:2:", "(Task).Pull: Task of the go binding has no method or field Pull"),
            ("bindings/go/README.md:2:", "(Job).Finish: the go binding has no type Job"),
        ],
    )


def test_a_checked_language_under_another_name_fails(repo):
    append(repo, "\n```py\nprint(1)\n```\n\n```bash\ntq gone\n```\n")
    assert_problems(
        repo,
        [
            (at_line(repo, "```py"), "```py: write ```python"),
            (at_line(repo, "```bash"), "```bash: write ```sh"),
        ],
    )


def test_a_fragment_that_names_an_example_file_fails(repo):
    append(repo, "\n```c fragment\n// examples/c/workers.c\ntq_close(queue);\n```\n")
    assert_problems(repo, [(where(repo, "```c fragment", 2), "one or the other")])


def test_commands_after_a_prompt_or_a_prefix_are_checked_and_console_output_is_not(repo):
    append(
        repo,
        "\n```sh\n$ tq gone1\nTQ_FIXTURE_URL=1 env tq gone2\nsudo -E true; exec tq gone3\n```\n"
        "\n```console\n$ tq push jobs.db \\\n>   --gone4\ntq gone-in-output\n```\n",
    )
    assert_problems(
        repo,
        [
            (where(repo, "$ tq gone1"), "tq has no subcommand gone1"),
            (where(repo, "env tq gone2"), "tq has no subcommand gone2"),
            (where(repo, "exec tq gone3"), "tq has no subcommand gone3"),
            (where(repo, "$ tq push jobs.db \\"), "`tq push` has no flag --gone4"),
        ],
    )


def test_tq_help_names_a_subcommand(repo):
    append(repo, "\nSee `tq help push`, `tq help schedule add` and `tq help gone`.\n")
    assert_problems(repo, [(where(repo, "`tq help gone`"), "tq has no subcommand gone")])


def test_a_command_with_an_unclosed_quote_is_still_checked(repo):
    append(repo, "\n```sh\ntq push jobs.db '{\"a\": --gone\n```\n")
    assert_problems(repo, [(where(repo, "--gone"), "`tq push` has no flag --gone")])


def test_python_submodules_bound_by_the_package_count_as_its_names(repo):
    append(repo, "\n```python fragment\nprint(tq.queue, tq._native, tq.missing)\n```\n")
    assert_problems(
        repo,
        [
            (where(repo, "tq.missing"), "tq._native is not exported by the python binding"),
            (where(repo, "tq.missing"), "tq.missing is not exported by the python binding"),
        ],
    )


def test_an_excerpt_path_that_climbs_out_fails(repo):
    append(repo, "\n```c\n// examples/c/../../include/tq.h\nvoid tq_close(tq_queue *queue);\n```\n")
    assert_problems(repo, [(where(repo, "// examples/c/../"), "plain path")])


def test_a_block_in_a_nested_list_item_is_a_block(repo):
    append(repo, "\n- a list\n    - nested:\n\n      ```c\n      tq_gone();\n      ```\n")
    assert_problems(
        repo,
        [
            (at_line(repo, "      ```c"), "```c block is neither an excerpt"),
            (at_line(repo, "      tq_gone();"), "tq_gone is not declared"),
        ],
    )


def test_a_span_is_closed_only_by_a_run_of_as_many_backticks(repo):
    append(repo, "\n``a ` tq_gone1 `` then `tq_gone2`, and ```tq_gone3`` is no span.\n")
    assert_problems(
        repo,
        [
            (where(repo, "tq_gone1"), "tq_gone1 is not declared"),
            (where(repo, "tq_gone1"), "tq_gone2 is not declared"),
        ],
    )


def test_an_excerpt_says_where_the_file_differs(repo):
    edit(repo / "examples" / "c" / "workers.c", "        tq_finish(queue, task);", "        tq_finish(queue, task); /* done */")
    [problem] = problems(repo)
    assert problem.endswith("lines 8-9 match, then the file has '        tq_finish(queue, task); /* done */'")


def test_an_excerpt_past_the_end_of_its_file_fails(repo):
    append(repo, "\n```python\n# examples/python/blog_example.py\n    task.finish()\n    task.finish()  # again\n```\n")
    assert_problems(repo, [(where(repo, "    task.finish()  # again"), "then the file ends")])


def test_an_excerpt_whose_first_line_is_nowhere_in_its_file_fails_there(repo):
    append(repo, "\n```js\n// examples/node/workers.js\nconst other = 1;\n```\n")
    assert_problems(repo, [(where(repo, "const other = 1;"), "this line is not in the file")])


def test_the_optional_parts_of_a_usage_line_are_checked(repo):
    append(repo, "\nAs `tq push FILE PAYLOAD [--priority N] [--queue|--gone1 NAME] [--gone2]`.\n")
    line = where(repo, "[--gone2]")
    assert_problems(repo, [(line, "`tq push` has no flag --gone1"), (line, "`tq push` has no flag --gone2")])


def test_an_inline_command_after_variables_or_a_prompt_is_checked(repo):
    append(repo, "\nRun `TQ_FIXTURE_URL=x tq gone1 jobs.db`, `$ tq gone2` or `$ make gone3`.\n")
    line = where(repo, "tq gone1")
    assert_problems(
        repo,
        [
            (line, "tq has no subcommand gone1"),
            (line, "tq has no subcommand gone2"),
            (line, "make gone3: no such target"),
        ],
    )
