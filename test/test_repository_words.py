"""The repository speaks of the project alone, not of how its work was organised.

Rule, over every file git tracks (text files; this file excepted): the word "session" (any
case, also "sessions", "session-20") does not occur. A measurement is dated (2026-11-29) and a
change is named by what it did or by its version; the history is in git log. A technical
session (DDS, HTTP, SSH, ...) may be written as such: the word is allowed right after one of
the names in ``TECHNICAL``. Fast: one read of the tracked files, no git history.
"""

import pathlib
import re
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
SELF = pathlib.Path(__file__).resolve().relative_to(ROOT).as_posix()
TECHNICAL = ("DDS", "HTTP", "HTTPS", "SSH", "TLS", "login", "terminal", "tmux", "browser")
WORD = re.compile(r"\bsessions?\b|\bsession[-_]?\d", re.IGNORECASE)
ALLOWED = re.compile(r"\b(?:" + "|".join(TECHNICAL) + r") sessions?\b", re.IGNORECASE)
BINARY_SUFFIXES = (".safetensors", ".png", ".jpg", ".npy", ".npz", ".pt", ".pth", ".mcap",
                   ".db3", ".gz", ".zip")


def tracked_files():
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"not a git checkout ({exc}): the rule is checked on tracked files")
    return [p for p in out.decode().split("\0") if p]


def offending_lines(text: str):
    """``(line number, line)`` where the word occurs outside an allowed technical phrase."""
    for no, line in enumerate(text.splitlines(), 1):
        if WORD.search(ALLOWED.sub("", line)):
            yield no, line.strip()


def test_no_session_words_in_tracked_files():
    found = []
    for rel in tracked_files():
        path = ROOT / rel
        if rel == SELF or rel.endswith(BINARY_SUFFIXES) or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue
        found += [f"{rel}:{no}: {line[:120]}"
                  for no, line in offending_lines(data.decode("utf-8", "replace"))]
    assert not found, "the word 'session' (see this test's docstring):\n" + "\n".join(found)


def test_the_rule_flags_what_it_should():
    word = "sess" "ion"  # split so that a grep of the repository for the pattern finds nothing
    text = (f"Measured in {word} 21.\nsince {word}s 13-20\nthe {word}-17 model\n"
            f"a DDS {word} stays\nin this {word.title()}\n2026-11-29: measured")
    assert [no for no, _ in offending_lines(text)] == [1, 2, 3, 5]
