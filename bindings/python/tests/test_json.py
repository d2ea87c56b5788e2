"""Payloads: bytes and str go in as JSON text exactly as given, other objects
through json.dumps; what comes out is the same text (``raw``) and its value
(``payload``)."""

import json

import pytest

import tq


def pushed_and_pulled(queue, obj):
    queue.push(obj)
    task = queue.pull()
    task.finish()
    return task


@pytest.mark.parametrize(
    "text",
    [b'{"a": 1}', b"  [1, 2,\n 3]  ", b'"just a string"', b"42", b"null", b"true", b'{"a":1,"a":2}'],
)
def test_bytes_are_stored_byte_for_byte(queue, text):
    task = pushed_and_pulled(queue, text)
    assert task.raw == text
    assert task.payload == json.loads(text)


def test_str_is_stored_as_given_in_utf8(queue):
    text = '{"name": "Zoë", "emoji": "\U0001f600", "escaped": "\\u00e9"}'
    task = pushed_and_pulled(queue, text)
    assert task.raw == text.encode("utf-8")
    assert task.payload == {"name": "Zoë", "emoji": "\U0001f600", "escaped": "é"}


def test_bytearray_and_memoryview_are_json_text(queue):
    assert pushed_and_pulled(queue, bytearray(b"[1]")).payload == [1]
    assert pushed_and_pulled(queue, memoryview(b'{"m": 2}')).payload == {"m": 2}


@pytest.mark.parametrize(
    "obj",
    [
        {"nested": {"list": [1, 2.5, None, True, "ü"]}},
        [],
        {},
        0,
        -1.25,
        None,
        False,
        ("tuple", "becomes", "list"),
        {"big": 2**70},
    ],
)
def test_objects_go_through_json_dumps(queue, obj):
    task = pushed_and_pulled(queue, obj)
    assert task.payload == json.loads(json.dumps(obj))
    assert json.loads(task.raw) == task.payload


def test_a_python_str_object_must_be_given_as_json_text(queue):
    with pytest.raises(tq.InvalidJSONError):
        queue.push("hello")
    assert pushed_and_pulled(queue, json.dumps("hello")).payload == "hello"


def test_payload_is_parsed_lazily_and_once(queue):
    queue.push(b'{"a": [1]}')
    task = queue.pull()
    first = task.payload
    assert task.payload is first
    task.finish()
