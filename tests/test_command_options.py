"""Every numeric option of every command is bounded: one line naming the option, no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.conftest import REPO

FILES = ("--qrels", "QRELS", "--baseline", "RUN", "--candidate", "RUN")
CASES = [
    ("compare", (*FILES, "--bootstrap", "1000000000000"), "--bootstrap: must be from 0 to"),
    ("compare", (*FILES, "--seed", "2" * 30), "--seed: must be from 0 to"),
    ("compare", (*FILES, "--rel-threshold", "1e9"), "--rel-threshold: not a whole number"),
    ("evaluate", ("--qrels", "QRELS", "--run", "RUN", "--rel-threshold", "99999"), "from -1,000"),
    ("agreement", ("--a", "QRELS", "--b", "QRELS", "--bootstrap", "-5"), "--bootstrap: must be"),
    ("agreement", ("--a", "QRELS", "--b", "QRELS", "--threshold", "x"), "--threshold: not a"),
    ("pool", ("--run", "RUN", "--depth", "0"), "--depth: must be from 1 to 100,000, not 0"),
    ("pool", ("--run", "RUN", "--depth", "5", "--double-share", "nan"), "--double-share: must"),
    ("pool", ("--run", "RUN", "--depth", "5", "--seconds", "-1"), "--seconds: must be from 0"),
    ("build_pool", ("acme", "--depth", "10" * 20), "--depth: must be from 1 to 100,000"),
    ("build_pool", ("acme", "--seed", "-3"), "--seed: must be from 0 to"),
    ("sample_queries", ("--log", "LOG", "--memory-limit", "lots"), "not an amount of memory"),
    ("sample_queries", ("--log", "LOG", "--threads", "0"), "--threads: must be from 1 to 256"),
    ("sample_queries", ("--log", "LOG", "--reformulation-window", "inf"), "window: must be"),
    ("import_log", ("acme", "LOG", "--seed", "1.5"), "--seed: not a whole number: '1.5'"),
]


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    paths = {"QRELS": "q1 0 d1 1\n", "RUN": "q1 Q0 d1 1 1.0 a\n", "LOG": "query\nshoes\n"}
    for name, text in paths.items():
        (tmp_path / name).write_text(text)
    return {name: str(tmp_path / name) for name in paths}


@pytest.mark.parametrize(("command", "args", "message"), CASES)
def test_it_refuses_an_option_out_of_bounds_in_one_line(
    files: dict[str, str], command: str, args: tuple[str, ...], message: str
) -> None:
    # Refused while parsing the arguments: before any file or project is looked at.
    with pytest.raises(CommandError, match=message) as refused:
        call_command(command, *(files.get(arg, arg) for arg in args))
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("compare", *FILES, "--bootstrap", "1000000000000"), "--bootstrap: must be from 0"),
        (("sample_queries", "--log", "LOG", "--memory-limit", "lots"), "not an amount of memory"),
    ],
)
def test_it_prints_no_traceback_on_the_command_line(
    files: dict[str, str], args: tuple[str, ...], message: str
) -> None:
    argv = [sys.executable, "manage.py", *(files.get(arg, arg) for arg in args)]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert message in done.stderr.splitlines()[-1]
