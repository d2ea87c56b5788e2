"""Test setup: the package under test is this source tree's, and every test
gets a fresh queue file in its own temporary directory."""

import sys
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PACKAGE_DIR))

import tq  # noqa: E402  (after the path is set)


@pytest.fixture
def path(tmp_path):
    """The path of a queue file that does not exist yet."""
    return tmp_path / "queue.db"


@pytest.fixture
def queue(path):
    """An open queue on a new file, closed after the test."""
    with tq.Queue(path) as opened:
        yield opened
