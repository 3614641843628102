"""Hostile RETURNN configs: each is refused, naming what it breaks, within 5 s and 1 GiB.

Each case of `CASES` runs in a forked child of the test process, its address space limited to 1 GiB above
what the child starts with (`RLIMIT_AS`) and killed after `_TIMEOUT` s, so a case over its bounds fails
its test and cannot take the test run down; the child reports its outcome, its time and the growth of its
peak memory (`ru_maxrss`), and the test asserts both bounds.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import resource
import select
import signal
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import pytest

from gradtx.returnn import (
    ReturnnConfigError,
    ReturnnConfigWarning,
    Unevaluated,
    _safe_eval_limits,
    read_config,
)
from gradtx.returnn._reader_files import MAX_CONFIG_BYTES, MAX_INCLUDE_DEPTH
from gradtx.returnn._safe_eval import safe_eval
from gradtx.returnn._safe_eval_limits import (
    MAX_BUILT_BYTES,
    MAX_ITERATIONS,
    MAX_SECONDS,
    MAX_SHARED_HASH,
    MAX_VALUE_BYTES,
    Budget,
    BudgetExceeded,
)

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="fork, RLIMIT_AS and /proc are Linux's")

GiB = 2**30
_SECONDS = 5.0  # the bounds every hostile config is read within
_MEMORY = GiB
_TIMEOUT = 30.0  # the child is killed after it
P = 2**61 - 1  # ints that are multiples of it share the hash 0


class Case(NamedTuple):
    """Files to write (name -> text, bytes, an int: a sparse file of that size, or "fifo"), the config
    read (a name among them or an absolute path), and the refusal: ("raises", pattern) or
    ("unevaluated", key, pattern) for a name read as `Unevaluated`."""

    files: dict[str, Any]
    config: str
    expect: tuple[str, ...]


def _py(text: str) -> str:
    return "#!rnn.py\n" + text


def _chain(depth: int) -> dict[str, Any]:
    files: dict[str, Any] = {f"c{i}.config": f"include c{i + 1}.config\n" for i in range(depth)}
    files[f"c{depth}.config"] = "learning_rate 0.1\n"
    return files


_MEMORY_BUDGET = rf"exceed {MAX_BUILT_BYTES // 2**20} MiB, the memory budget of a read \(`MAX_BUILT_BYTES`\)"
_TIME_BUDGET = rf"took over {MAX_SECONDS:g} s, the time budget of a read \(`MAX_SECONDS`\)"
_SIZE_BUDGET = rf"over the size budget of a read: .* {MAX_CONFIG_BYTES} bytes together"
_COLLIDE = f"keys share hash values \\(over {MAX_SHARED_HASH} distinct keys with one hash"

CASES: dict[str, Case] = {
    # values built: bytes, not only element counts
    "long-strings": Case(
        {"a.config": _py("s = 'a' * 10**6\nx = [s[1:] + 'b' for i in range(10**6)]\n")},
        "a.config",
        ("raises", "line 3 of .*" + _MEMORY_BUDGET),
    ),
    "big-int-sums": Case(
        {"a.config": _py("y = 1 << 99990\nx = [y + i for i in range(10**6)]\n")},
        "a.config",
        ("raises", _MEMORY_BUDGET),
    ),
    "sums-of-big-ints": Case(  # a list of 10**6 references to one 12 KB int: 12 GB to add up
        {"a.config": _py("y = 1 << 99000\nx = sum([y] * 999_999) + sum([y] * 999_999)\n")},
        "a.config",
        ("unevaluated", "x", f"a value of over {MAX_VALUE_BYTES // 2**20} MiB"),
    ),
    "changed-in-place": Case(  # `c` repeated 1,000 times, then appended to: `R` holds 6 * 10**8 numbers
        {"a.config": _py("x = list(range(600_000))\nc = []\nR = [c] * 1000\nc.append(x)\ns = str(R)\n")},
        "a.config",
        ("unevaluated", "s", "a value of over 1000000 elements"),
    ),
    # files: their size checked before they are read
    "include-2gb": Case(
        {"a.config": "learning_rate 0.1\ninclude big.config\n", "big.config": 2**31},
        "a.config",
        ("raises", "big.config' \\(included from line 2 of .*'\\) is 2147483648 bytes.*" + _SIZE_BUDGET),
    ),
    "python-50mb": Case({"big.py": b"x = 1\n" * (50 * 2**20 // 6)}, "big.py", ("raises", _SIZE_BUDGET)),
    "lines-50mb": Case(  # a typed key: each line evaluated
        {
            "t.py": "learning_rate = 0.01\n",
            "big.config": b"include t.py\n" + b"learning_rate 0.1\n" * 2_900_000,
        },
        "big.config",
        ("raises", _SIZE_BUDGET),
    ),
    # work per operation, and the time budget
    "big-int-squares": Case(
        {"a.config": _py("y = 1 << 49990\nx = [(y * y) % 7 for i in range(10**6)]\n")},
        "a.config",
        ("raises", "line 3 of .*" + _TIME_BUDGET),
    ),
    "big-int-square-over-cap": Case(  # refused before the product is computed
        {"a.config": _py("y = 1 << 99990\nx = [(y * y) % 7 for i in range(10**6)]\n")},
        "a.config",
        ("unevaluated", "x", "a product of a 99991-bit and a 99991-bit integer is over 100000 bits"),
    ),
    "comprehension-2000x2000": Case(
        {"a.config": _py("x = [sum(1 for j in range(2000)) for i in range(2000)]\n")},
        "a.config",
        ("unevaluated", "x", f"comprehensions of over {MAX_ITERATIONS} iterations"),
    ),
    "sum-of-lists": Case(
        {"a.config": _py("x = sum([[0] * 100] * 9000, [])\n")},
        "a.config",
        ("unevaluated", "x", "a `sum` of sequences copying 4050450000 elements"),
    ),
    "round-to-huge-digits": Case(
        {"a.config": _py("x = round(5, -10**7)\n")}, "a.config", ("unevaluated", "x", "`round` to -10000000")
    ),
    # keys sharing a hash: each costs a probe past all the others
    "hash-set": Case(
        {"a.config": _py(f"x = set(range(0, 10**5 * {P}, {P}))\n")},
        "a.config",
        ("unevaluated", "x", _COLLIDE),
    ),
    "hash-set-comprehension": Case(
        {"a.config": _py(f"x = {{i for i in range(0, 10**5 * {P}, {P})}}\n")},
        "a.config",
        ("unevaluated", "x", _COLLIDE),
    ),
    "hash-dict": Case(
        {"a.config": _py(f"x = dict(zip(range(0, 10**5 * {P}, {P}), range(10**5)))\n")},
        "a.config",
        ("unevaluated", "x", _COLLIDE),
    ),
    "hash-dict-comprehension": Case(
        {"a.config": _py(f"x = {{i: 0 for i in range(0, 10**5 * {P}, {P})}}\n")},
        "a.config",
        ("unevaluated", "x", _COLLIDE),
    ),
    "hash-dict-statements": Case(
        {"a.config": _py("d = {}\n" + "".join(f"d[{i * P}] = 0\n" for i in range(10_000)))},
        "a.config",
        ("unevaluated", "d", _COLLIDE),
    ),
    "hash-set-union": Case(
        {
            "a.config": _py(
                f"a = set(range(0, 30 * {P}, {P}))\nb = set(range(30 * {P}, 60 * {P}, {P}))\nx = a | b\n"
            )
        },
        "a.config",
        ("unevaluated", "x", _COLLIDE),
    ),
    # regular files only, and no file content in a message
    "fifo": Case(
        {"pipe.config": "fifo"}, "pipe.config", ("raises", "'.*pipe.config' is a FIFO \\(named pipe\\)")
    ),
    "include-fifo": Case(
        {"a.config": "include pipe.config\n", "pipe.config": "fifo"},
        "a.config",
        ("raises", "pipe.config' \\(included from line 1 of .*\\) is a FIFO"),
    ),
    "include-proc-environ": Case(
        {"a.config": "include /proc/self/environ\n"},
        "a.config",
        ("raises", "'/proc/self/environ' \\(included from line 1 .* is a file of the kernel's /proc or /sys"),
    ),
    "dev-zero": Case({}, "/dev/zero", ("raises", "'/dev/zero' is a character device, not a config file")),
    "include-etc-passwd": Case(
        {"a.config": "include /etc/passwd\n"},
        "a.config",
        ("raises", "of '/etc/passwd' \\(included from line 1 of .*\\)"),
    ),
    # encodings
    "latin-1": Case(
        {"a.config": "learning_rate 0.1\n# café\n".encode("latin-1")},
        "a.config",
        ("raises", "is not UTF-8 text: byte 0xe9 at offset 23 \\(line 2\\)"),
    ),
    "utf-16": Case(
        {"a.config": "learning_rate 0.1\n".encode("utf-16")}, "a.config", ("raises", "is UTF-16 text")
    ),
    "utf-8-bom": Case(
        {"a.config": "learning_rate 0.1\n".encode("utf-8-sig")},
        "a.config",
        ("raises", "starts with a UTF-8 byte-order mark"),
    ),
    "binary": Case(
        {"a.config": b"\x7fELF\x02\x01\x01\x00" + bytes(range(256))},
        "a.config",
        ("raises", "has a NUL byte at offset 7 \\(line 1\\): it is a binary file"),
    ),
    # recursion
    "json-deep": Case(
        {"a.json": '{"a": ' + "[" * 10**5 + "]" * 10**5 + "}"},
        "a.json",
        ("raises", "the JSON config '.*a.json' is nested 100001 levels deep"),
    ),
    "json-unterminated-strings": Case(  # each `"` starts a string the comment remover scans to the end
        {"a.json": '{"a": "' + '\\"' * 300_000}, "a.json", ("raises", "looks like JSON but is invalid")
    ),
    "python-deep": Case(
        {"a.py": "x = " + "+".join(["1"] * 10**5) + "\n"}, "a.py", ("raises", "is nested too deeply to parse")
    ),
    "include-self": Case(
        {"a.config": "learning_rate 0.1\ninclude a.config\n"},
        "a.config",
        (
            "raises",
            "line 2 of '.*a.config' includes 'a.config', which is being read: the includes form a cycle",
        ),
    ),
    "include-cycle": Case(
        {"a.config": "include b.config\n", "b.config": "x 1\ninclude a.config\n"},
        "a.config",
        ("raises", "a cycle, '.*a.config' \\(line 1\\) -> '.*b.config' \\(line 2\\) -> '.*a.config'"),
    ),
    "include-chain": Case(
        _chain(MAX_INCLUDE_DEPTH + 5),
        "c0.config",
        ("raises", f"includes nest at most {MAX_INCLUDE_DEPTH} deep"),
    ),
}


def _write(tmp_path: pathlib.Path, files: dict[str, Any]) -> None:
    for name, content in files.items():
        path = tmp_path / name
        if content == "fifo":
            os.mkfifo(path)
        elif isinstance(content, int):  # a sparse file: no disk, no time
            with open(path, "wb") as f:
                f.truncate(content)
        else:
            path.write_bytes(content if isinstance(content, bytes) else content.encode())


def _bounded(read: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """`read()` in a forked child limited to `_MEMORY` more address space and `_TIMEOUT` s: its outcome,
    the seconds it took and the growth of its peak memory."""
    r, w = os.pipe()
    with warnings.catch_warnings():  # JAX warns that forking its process may deadlock: the child runs none
        warnings.simplefilter("ignore")
        pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(r)
            pages = int(pathlib.Path("/proc/self/statm").read_text().split()[0])
            hard = resource.getrlimit(resource.RLIMIT_AS)[1]
            soft = pages * os.sysconf("SC_PAGE_SIZE") + _MEMORY
            resource.setrlimit(resource.RLIMIT_AS, (soft if hard < 0 else min(soft, hard), hard))
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            start = time.monotonic()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    values = read()
                    report: dict[str, Any] = {
                        "outcome": "read",
                        "reasons": {k: v.reason for k, v in values.items() if isinstance(v, Unevaluated)},
                    }
                except Exception as e:  # reported to the parent
                    report = {"outcome": type(e).__name__, "message": str(e)}
            report["seconds"] = time.monotonic() - start
            report["memory"] = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak) * 1024
            report["warnings"] = [str(c.message) for c in caught]
            os.write(w, json.dumps(report).encode())
        finally:
            os._exit(0)
    os.close(w)
    chunks, deadline = [], time.monotonic() + _TIMEOUT
    try:
        while (left := deadline - time.monotonic()) > 0 and select.select([r], [], [], left)[0]:
            if not (chunk := os.read(r, 1 << 16)):
                break
            chunks.append(chunk)
        else:
            os.kill(pid, signal.SIGKILL)
            pytest.fail(f"the read took over {_TIMEOUT} s (killed)")
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    assert chunks, "the child died without a report (out of memory?)"
    return json.loads(b"".join(chunks))


@pytest.mark.parametrize("name", list(CASES))
def test_hostile_config_is_refused_within_bounds(name, tmp_path, monkeypatch):
    case = CASES[name]
    if case.config.startswith("/") and not os.path.exists(case.config):
        pytest.skip(f"{case.config} does not exist here")
    if "/etc/passwd" in str(case.files) and not os.path.isfile("/etc/passwd"):
        pytest.skip("/etc/passwd does not exist here")
    _write(tmp_path, case.files)
    monkeypatch.chdir(tmp_path)  # includes name files relative to the working directory, as in RETURNN
    config = case.config if case.config.startswith("/") else str(tmp_path / case.config)
    if case.expect[0] != "raises":
        # the bound of one value singles the hostile value out and the read goes on: here the read must not
        # run out of the whole read's time first, as a loaded machine's can (the cases that raise keep
        # `MAX_SECONDS`; the child inherits this setting)
        monkeypatch.setattr(_safe_eval_limits, "MAX_SECONDS", _SECONDS - 1.0)
    report = _bounded(lambda: read_config(config))
    assert report["seconds"] < _SECONDS, report
    assert report["memory"] < _MEMORY, report
    if case.expect[0] == "raises":
        assert report["outcome"] in ("ReturnnConfigError", "BudgetExceeded"), report
        assert _search(case.expect[1], report["message"]), report["message"]
    else:
        assert report["outcome"] == "read", report
        _, key, pattern = case.expect
        assert _search(pattern, report["reasons"].get(key, "")), report["reasons"]


def _search(pattern: str, text: str) -> bool:
    return re.search(pattern, text) is not None


@pytest.mark.parametrize("path", ["/proc/self/environ", "/etc/passwd"])
def test_no_content_of_an_included_file_is_in_the_message(path, tmp_path, monkeypatch):
    if not os.path.isfile(path):
        pytest.skip(f"{path} does not exist here")
    monkeypatch.setenv("GRADTX_SECRET", "hunter2-secret")
    (tmp_path / "a.config").write_text(f"learning_rate 0.1\ninclude {path}\n")
    with pytest.raises(ReturnnConfigError) as info:
        read_config(tmp_path / "a.config")
    message = str(info.value)
    assert "hunter2" not in message and "root:" not in message
    content = pathlib.Path(path).read_bytes().replace(b"\0", b"\n").decode(errors="replace")
    assert not [line for line in content.splitlines() if len(line) > 8 and line in message]


def test_messages_quote_the_configs_own_lines_shortened_and_never_an_included_file(tmp_path):
    (tmp_path / "own.config").write_text("x" * 500 + "\n")
    with pytest.raises(ReturnnConfigError, match=r"line 1 of .*: 'x{57}\.\.\.' has no value"):
        read_config(tmp_path / "own.config")
    (tmp_path / "inc.py").write_text("x = = 2\n")
    (tmp_path / "main.config").write_text(f"include {tmp_path / 'inc.py'}\n")
    with pytest.raises(ReturnnConfigError, match=r"'.*inc.py' .*line 1 is not valid Python\.$"):
        read_config(tmp_path / "main.config")
    (tmp_path / "inc.config").write_bytes("a 1\nsecret caf\xe9\n".encode("latin-1"))
    (tmp_path / "main.config").write_text(f"include {tmp_path / 'inc.config'}\n")
    with pytest.raises(ReturnnConfigError, match=r"not UTF-8 text: a byte at offset 14 \(line 2\)"):
        read_config(tmp_path / "main.config")


def test_a_read_within_the_budgets_is_unchanged(tmp_path):
    """The budgets leave a large ordinary config alone: a network of 1,000 layers added by statements, a
    schedule of 10**4 epochs, a list of 10**5 numbers, an include."""
    layer = '{{"class": "linear", "from": ["l{}"], "n_out": 512}}'
    layers = "".join(f'network["l{i}"] = {layer.format(i - 1)}\n' for i in range(1000))
    text = f"network = {{}}\n{layers}learning_rates = [1e-3 * 0.99**i for i in range(10**4)]\n"
    (tmp_path / "big.config").write_text(_py(text + "steps = list(range(10**5))\n"))
    (tmp_path / "main.config").write_text(f"include {tmp_path / 'big.config'}\nlearning_rate 0.1\n")
    values = read_config(tmp_path / "main.config")
    assert len(values["network"]) == 1000 and values["network"]["l9"]["from"] == ["l8"]
    assert len(values["learning_rates"]) == 10**4 and values["steps"][-1] == 10**5 - 1
    assert values["learning_rate"] == 0.1


DYNAMIC = """\
#!rnn.py
learning_rate = 0.01
exec("learning_rate = 0.5")
globals()["gradient_clip"] = 1.0
globals().update(optimizer={"class": "adam"}, **{"momentum": 0.9})
config.set("batch_size", 100)
code = "x = 1"
exec(code)
from base_config import *
import sys
sys.modules[__name__].num_epochs = 3
for i in range(2):
    globals()["lr%i" % i] = 0.1
def setup():
    globals()["inside_a_function"] = 1
config = globals()["config"]
kept = 1
"""


def test_dynamic_statements_warn_naming_the_line_and_their_names_are_unevaluated(tmp_path):
    (tmp_path / "dyn.config").write_text(DYNAMIC)
    with pytest.warns(ReturnnConfigWarning) as caught:
        values = read_config(tmp_path / "dyn.config")
    messages = [str(w.message) for w in caught]
    expected = [
        r"line 3 of .*: `exec\('learning_rate = 0.5'\)` sets `learning_rate` when RETURNN runs the config; "
        r"the reader does not run it, so `learning_rate` is read as unevaluated",
        r"line 4 of .*: `globals\(\)\['gradient_clip'\]` sets `gradient_clip`",
        r"line 5 of .*: `globals\(\).update\(.*\)` sets `optimizer` and can set any other config name",
        r"line 6 of .*: `config.set\('batch_size', 100\)` sets `batch_size`",
        r"line 8 of .*: `exec\(code\)` can set any config name when RETURNN runs the config; the reader does "
        r"not run it, so the values it sets are not taken",
        r"line 9 of .*: `from base_config import \*` can set any config name",
        r"line 11 of .*: `sys.modules\[__name__\].num_epochs` sets `num_epochs`",
        r"line 13 of .*: `globals\(\)\['lr%i' % i\]` can set any config name",
    ]
    assert len(messages) == len(expected), messages
    for pattern, message in zip(expected, messages, strict=True):
        assert _search(pattern, message), (pattern, message)
    lines = {"learning_rate": 3, "gradient_clip": 4, "optimizer": 5, "batch_size": 6, "num_epochs": 11}
    for key, line in lines.items():
        assert isinstance(values[key], Unevaluated) and values[key].line == line, values[key]
        assert "which the reader does not run" in values[key].reason
    assert values["kept"] == 1 and "momentum" not in values and "globals" not in values


def test_reading_a_config_with_no_dynamic_statement_does_not_warn(tmp_path):
    (tmp_path / "plain.config").write_text(_py("config = globals()['config']\nx = config.int('x', 3)\n"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_config(tmp_path / "plain.config") == {"x": 3}


def test_a_budget_spent_stops_the_read_naming_it():
    spent = Budget()
    spent.deadline = time.monotonic() - 1.0
    with pytest.raises(BudgetExceeded, match=r"line 1 of the config: .*" + _TIME_BUDGET):
        safe_eval("[1, 2]", {}, spent)
    full = Budget()
    full.built = MAX_BUILT_BYTES
    with pytest.raises(BudgetExceeded, match=_MEMORY_BUDGET):
        safe_eval("[1, 2]", {}, full)
    assert safe_eval("[1, 2]", {}) == [1, 2]  # outside a read, each evaluation has a budget of its own
