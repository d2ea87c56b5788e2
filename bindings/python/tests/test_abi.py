"""The binding's declarations against include/tq.h: every function declared
with the header's types, every status, durability and state known, the same
constants and version. A change to the header fails here until the binding
follows it."""

import builtins
import ctypes
import re

import pytest
from helpers import PACKAGE_DIR, REPOSITORY

import tq
from tq import _limits, _native

HEADER = (REPOSITORY / "include" / "tq.h").read_text()

OPAQUE = {
    "tq_queue": _native.tq_queue,
    "tq_task": _native.tq_task,
    "tq_options": _native.tq_options,
    "tq_push_options": _native.tq_push_options,
    "tq_pull_options": _native.tq_pull_options,
    "tq_cancel": _native.tq_cancel,
    "tq_schedule_options": _native.tq_schedule_options,
    "tq_schedule": _native.tq_schedule,
}
SCALARS = {
    "void": None,
    "bool": ctypes.c_bool,
    "int32_t": ctypes.c_int32,
    "uint32_t": ctypes.c_uint32,
    "int64_t": ctypes.c_int64,
    "uint64_t": ctypes.c_uint64,
    "size_t": ctypes.c_size_t,
    "double": ctypes.c_double,
    "enum tq_status": ctypes.c_int,
}

# Where the binding deliberately declares another type than the header's:
# the payload is read by length, so its pointer must not become bytes at the
# first NUL.
DELIBERATE = {
    ("tq_task_payload", "result"): ctypes.c_void_p,
    ("tq_schedule_payload", "result"): ctypes.c_void_p,
    # A string tq hands out, kept as a pointer for tq_string_free.
    ("tq_step_get", 3): ctypes.POINTER(ctypes.c_void_p),
    ("tq_wait_for_event", 4): ctypes.POINTER(ctypes.c_void_p),
    ("tq_string_free", 0): ctypes.c_void_p,
}


def ctypes_type(c_type: str):
    """The ctypes type for a C type written as in the header: a base type,
    then pointers ("const char *const *" is a pointer to c_char_p)."""
    words = [word for word in c_type.replace("*", " * ").split() if word != "const"]
    stars = words.count("*")
    base = " ".join(word for word in words if word != "*")
    if base == "char":
        result, stars = ctypes.c_char_p, stars - 1
    elif base.startswith("struct "):
        result = OPAQUE[base[len("struct ") :]]
    else:
        result = SCALARS[base]
    for _ in range(stars):
        result = ctypes.POINTER(result)
    return result


def header_functions():
    """name -> (result C type, [argument C types]) for every function."""
    functions = {}
    pattern = re.compile(r"^([a-z][\w ]*?[\s*]+)(tq_\w+)\(([^)]*)\);", re.MULTILINE)
    for result, name, arguments in pattern.findall(HEADER):
        if arguments.strip() == "void":
            types = []
        else:
            # Each argument is "TYPE NAME": drop the name.
            types = [re.sub(r"\w+$", "", argument.strip()) for argument in arguments.split(",")]
        functions[name] = (result.strip(), types)
    return functions


def header_enum(name):
    body = re.search(r"typedef enum %s \{(.*?)\} %s;" % (name, name), HEADER, re.DOTALL).group(1)
    return {key: int(value) for key, value in re.findall(r"^\s*(TQ_\w+) = (-?\d+),", body, re.MULTILINE)}


FUNCTIONS = header_functions()


def test_the_header_parses_into_functions():
    assert len(FUNCTIONS) >= 59
    assert FUNCTIONS["tq_push"][1] == [
        "struct tq_queue *",
        "const char *",
        "size_t ",
        "const struct tq_push_options *",
        "int64_t *",
    ]


def test_every_function_of_the_header_is_declared_and_nothing_else():
    assert sorted(_native.PROTOTYPES) == sorted(FUNCTIONS)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_each_function_has_the_headers_types(name):
    result, arguments = FUNCTIONS[name]
    function = getattr(_native.lib, name)
    assert function.restype == DELIBERATE.get((name, "result"), ctypes_type(result))
    assert function.argtypes == [
        DELIBERATE.get((name, index), ctypes_type(argument)) for index, argument in enumerate(arguments)
    ]


def test_every_error_status_has_its_exception():
    statuses = header_enum("tq_status")
    errors = {value for key, value in statuses.items() if key.startswith("TQ_ERR_")}
    assert errors == set(tq.errors.BY_STATUS)
    for key, value in statuses.items():
        if value < 0:
            # TQ_ERR_NOT_HELD -> NotHeldError; TQ_ERR_IO -> IoError, ... but a
            # name Python's builtins already use drops its suffix:
            # TQ_ERR_INTERRUPTED -> Interrupted, not InterruptedError.
            words = key[len("TQ_ERR_") :].split("_")
            expected = "".join(word if word == "JSON" else word.capitalize() for word in words) + "Error"
            if hasattr(builtins, expected):
                expected = expected.removesuffix("Error")
            assert tq.errors.BY_STATUS[value].__name__ == expected
            assert not hasattr(builtins, expected)
    assert tq.Interrupted is tq.errors.BY_STATUS[statuses["TQ_ERR_INTERRUPTED"]]
    assert statuses["TQ_OK"] == _limits.OK
    assert statuses["TQ_EMPTY"] == _limits.EMPTY
    assert statuses["TQ_DUPLICATE"] == _limits.DUPLICATE
    assert statuses["TQ_MERGED"] == _limits.MERGED
    assert statuses["TQ_SUSPENDED"] == _limits.SUSPENDED
    assert statuses["TQ_TIMEOUT"] == _limits.TIMEOUT
    non_errors = {key for key, value in statuses.items() if value >= 0}
    assert non_errors == {"TQ_OK", "TQ_EMPTY", "TQ_DUPLICATE", "TQ_MERGED", "TQ_SUSPENDED", "TQ_TIMEOUT"}


def test_durabilities_and_states_match_the_header():
    assert header_enum("tq_durability") == {f"TQ_DURABILITY_{d.name}": d.value for d in tq.Durability}
    assert header_enum("tq_state") == {f"TQ_STATE_{s.name}": s.value for s in tq.State}
    assert header_enum("tq_catch_up") == {f"TQ_CATCH_UP_{c.name}": c.value for c in tq.CatchUp}


def header_define(name):
    """The value of ``#define NAME VALUE``, evaluated (a number or a product)."""
    value = re.search(r"^#define %s (.+)$" % name, HEADER, re.MULTILINE).group(1)
    assert re.fullmatch(r"[\d ()*]+", value), value
    return eval(value)  # digits, spaces, parentheses and * only, as checked


@pytest.mark.parametrize(
    "name",
    [
        "MAX_PAYLOAD_LEN",
        "MAX_QUEUE_NAME_LEN",
        "MAX_UNIQUE_KEY_LEN",
        "MAX_REASON_LEN",
        "DEFAULT_MAX_ATTEMPTS",
        "DEFAULT_POOL_SIZE",
        "MAX_POOL_SIZE",
        "MAX_GROUP_AT_ONCE",
    ],
)
def test_constants_match_the_header(name):
    assert getattr(tq, name) == header_define(f"TQ_{name}")


def test_versions_agree():
    header = re.search(r'#define TQ_VERSION "(.*)"', HEADER).group(1)
    project = re.search(
        r'^version = "(.*)"$', (PACKAGE_DIR / "pyproject.toml").read_text(), re.MULTILINE
    ).group(1)
    assert tq.__version__ == project == header == tq.library_version()
    major, minor, _ = header.split(".")
    assert _native.ABI_VERSION == (int(major), int(minor))
    # Before 1.0 a minor release may change the ABI, so the SONAME carries both.
    assert _native.SONAME == (f"libtq.so.{major}.{minor}" if major == "0" else f"libtq.so.{major}")
