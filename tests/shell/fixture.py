"""The differential corpus's fixture: one directory tree, built the same way every time.

`python3 tests/shell/fixture.py DIR` (or `build(DIR)`) creates DIR (it must not exist or be
empty) holding: a CSV, Python files with TODOs, nested directories, a file with spaces in its
name, a binary file, an empty file, a log file, a hidden file, an empty directory and a
symlink, every file and directory with a fixed modification time (so `ls -t` and anything
ordered by time is defined). Standard library only: the same source also runs inside the
guest (the `--server` mode of differential.py builds the tree there with `python3 -c`).
"""

import os
import sys

# 2024-01-01 00:00:00 UTC; each entry's mtime is BASE + its minute below (not alphabetical,
# so `ls -t` differs from `ls`).
BASE = 1704067200

CSV = """name,city,score,age
alice,paris,88,31
bob,london,72,45
carol,paris,95,28
dave,berlin,60,52
eve,london,72,39
frank,madrid,81,33
grace,paris,77,41
heidi,berlin,90,26
ivan,london,55,60
judy,rome,88,35
mallory,madrid,67,47
oscar,paris,99,22
"""

NOTES = """Shopping list
milk
eggs
TODO: buy bread
todo: call bob
Meeting at 10
the quick brown fox
jumps over the lazy dog
The End
"""

LOG = "".join(
    f"2024-01-0{1 + i // 8} 0{i % 8}:{(i * 7) % 60:02d}:00 {lvl} {msg}\n"
    for i, (lvl, msg) in enumerate(
        [
            ("INFO", "server started on port 8080"),
            ("INFO", "request GET /index.html 200"),
            ("WARN", "slow request GET /api/users 1532ms"),
            ("INFO", "request GET /api/users 200"),
            ("ERROR", "database connection failed: timeout"),
            ("INFO", "retrying database connection"),
            ("INFO", "request POST /api/login 200"),
            ("ERROR", "request POST /api/upload 500"),
            ("WARN", "disk usage at 85%"),
            ("INFO", "request GET /favicon.ico 404"),
            ("INFO", "request GET /api/items 200"),
            ("ERROR", "unhandled exception in worker 3"),
            ("INFO", "shutting down"),
        ]
    )
)

TRAIN = '''import sys

# TODO: load the real data set
def train(epochs):
    loss = 1.0
    for epoch in range(1, epochs + 1):
        loss = loss / 2
        print(f"epoch {epoch} loss {loss:.4f}")
    print("warning: no validation set", file=sys.stderr)
    return loss


if __name__ == "__main__":
    final = train(5)
    print(f"final loss {final:.4f}")
'''

MAIN = '''from src.utils import add, mean

# TODO: parse arguments
# FIXME: handle empty input
def main():
    values = [3, 1, 4, 1, 5, 9, 2, 6]
    print("sum", add(*values[:2]))
    print("mean", mean(values))


if __name__ == "__main__":
    main()
'''

UTILS = '''def add(a, b):
    return a + b


def mean(xs):
    # TODO: handle an empty list
    return sum(xs) / len(xs)
'''

HELPERS = '''import os


def list_py(root):
    out = []
    for dirpath, _dirs, files in os.walk(root):
        out.extend(os.path.join(dirpath, f) for f in files if f.endswith(".py"))
    return sorted(out)
'''

DEEP = '''VALUE = 42  # todo lower case
'''

TEST_UTILS = '''from src.utils import add


def test_add():
    assert add(2, 2) == 4
'''

README = """# Project

A small project for the shell's differential tests.

## Usage

Run `python3 train.py`.
"""

GUIDE = """Guide
=====

Step one: read data.csv
Step two: run train.py
Step three: check app.log
"""

CONFIG = """{
  "name": "demo",
  "version": "1.2.3",
  "debug": false,
  "threads": 4
}
"""

RUN_SH = """#!/bin/sh
echo running
python3 train.py > out.txt 2>&1
tail -1 out.txt
"""

NUMBERS = "".join(f"{n}\n" for n in [42, 7, 19, 7, 100, 3, 42, 8, 15, 7, 61, 2, 99, 23, 8])

WORDS = """banana
apple
cherry
apple
banana
date
Apple
cherry
apple
elderberry
fig
banana
"""

TABS = "id\tname\tqty\n1\tbolt\t10\n2\tnut\t250\n3\twasher\t7\n"

BINARY = bytes(range(256)) + b"\x00\x01PNG\r\n\x1a\n" + bytes(reversed(range(64)))

SPACES = "a file with spaces in its name\nsecond line\n"

HIDDEN = "SECRET_LEVEL=low\n"

OLD = "line one\nline two\nline three\nline four\n"
NEW = "line one\nline 2\nline three\nline four\nline five\n"

# (path, contents or None for a directory, minute offset of its mtime)
FILES = [
    ("data.csv", CSV, 30),
    ("notes.txt", NOTES, 10),
    ("app.log", LOG, 50),
    ("empty.txt", "", 5),
    ("file with spaces.txt", SPACES, 15),
    ("image.bin", BINARY, 20),
    ("numbers.txt", NUMBERS, 25),
    ("words.txt", WORDS, 35),
    ("tabs.tsv", TABS, 40),
    ("train.py", TRAIN, 45),
    ("config.json", CONFIG, 55),
    ("old.txt", OLD, 60),
    ("new.txt", NEW, 65),
    (".hidden", HIDDEN, 3),
    ("src/__init__.py", "", 70),
    ("src/main.py", MAIN, 75),
    ("src/utils.py", UTILS, 80),
    ("src/lib/helpers.py", HELPERS, 85),
    ("src/lib/deep/deeper/value.py", DEEP, 90),
    ("tests/test_utils.py", TEST_UTILS, 95),
    ("docs/readme.md", README, 100),
    ("docs/guide.txt", GUIDE, 105),
    ("scripts/run.sh", RUN_SH, 110),
]
DIRS = [
    # deepest first, so setting a parent's mtime comes after its children are made
    ("src/lib/deep/deeper", 120),
    ("src/lib/deep", 121),
    ("src/lib", 122),
    ("src", 123),
    ("tests", 124),
    ("docs", 125),
    ("scripts", 126),
    ("tmp", 127),
]
SYMLINKS = [("link_to_notes", "notes.txt", 130)]


def build(root):
    os.makedirs(root, exist_ok=True)
    for path, text, _ in FILES:
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full) or root, exist_ok=True)
        data = text if isinstance(text, bytes) else text.encode()
        with open(full, "wb") as f:
            f.write(data)
    for path, _ in DIRS:
        os.makedirs(os.path.join(root, path), exist_ok=True)
    for name, target, _ in SYMLINKS:
        os.symlink(target, os.path.join(root, name))
    for path, _, minute in FILES:
        t = BASE + minute * 60
        os.utime(os.path.join(root, path), (t, t))
    for name, _, minute in SYMLINKS:
        t = BASE + minute * 60
        try:
            os.utime(os.path.join(root, name), (t, t), follow_symlinks=False)
        except (NotImplementedError, OSError):
            pass
    for path, minute in DIRS:
        t = BASE + minute * 60
        os.utime(os.path.join(root, path), (t, t))
    t = BASE + 200 * 60
    os.utime(root, (t, t))


def files():
    """The regular files as (relative path, bytes): what an upload of the tree would carry."""
    return [(p, t if isinstance(t, bytes) else t.encode()) for p, t, _ in FILES]


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: fixture.py DIR")
    build(sys.argv[1])
