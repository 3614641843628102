"""`read_config` and `safe_eval`: RETURNN's config formats read as RETURNN reads them, never executed."""

import textwrap

import numpy as np
import pytest

from gradtx.returnn import _safe_eval_limits
from gradtx.returnn._common import ReturnnConfigError
from gradtx.returnn._keys import check_keys
from gradtx.returnn._reader import Unevaluated, read_config
from gradtx.returnn._safe_eval import MAX_ELEMENTS, ModuleRef, safe_eval
from gradtx.returnn._safe_eval_limits import MAX_ITERATIONS

returnn_config = pytest.importorskip("returnn.config")

PY_CONFIG = """\
#!rnn.py
# a typical RETURNN training config
from __future__ import annotations
import os
import numpy
import numpy as np
import math
from returnn.util.basic import NumbersDict

use_tensorflow = True
task = "train"
device = "gpu"
num_epochs = 30
batch_size = 5000
max_seqs = 40
learning_rates = list(numpy.linspace(3e-4, 8e-4, num=10)) + [8e-4] * 20
learning_rate = 8e-4
warmup = np.geomspace(1e-5, 1e-3, 4).tolist()
peak = 1e-3 * math.sqrt(4.0)
min_learning_rate = learning_rate / 50
optimizer = {"class": "adam", "epsilon": 1e-8}
gradient_clip_global_norm = 5
accum_grad_multiple_step = 2
accum_grad_multiple_step += 1
learning_rate_control = "newbob_multi_epoch"
newbob_multi_num_epochs = 6 if use_tensorflow else 3
_helper = 3
network = {
    "lstm%i" % i: {"class": "rec", "unit": "nativelstm2", "n_out": 512, "from": ["data"]} for i in range(2)
}
network["output"] = {"class": "softmax", "loss": "ce", "from": ["lstm1"], "dims": [f"d{j}" for j in range(3)]}
first, second = learning_rates[:2]
if task == "train":
    branch = "taken"
else:
    branch = "not taken"


def custom_schedule(*, global_train_step, **kwargs):
    return 1.0


for k in range(3):
    loop_value = k
seq_limits = NumbersDict(5)
home = os.environ.get("HOME", "")
"""


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _returnn(path):
    config = returnn_config.Config()
    with open(path) as f:  # a stream: RETURNN leaves a path's file open
        config.load_file(f)
    return config


def test_python_config_equals_returnns_values(tmp_path):
    path = _write(tmp_path, "train.config", PY_CONFIG)
    values = read_config(path)
    oracle = _returnn(path)
    evaluated = {k: v for k, v in values.items() if not isinstance(v, Unevaluated)}
    assert len(evaluated) == 20
    for key, value in evaluated.items():
        assert value == oracle.typed_value(key), key
    assert values["learning_rates"][:3] == pytest.approx([3e-4, 3.5555555555555e-4, 4.1111111111111e-4])
    assert values["accum_grad_multiple_step"] == 3 and values["newbob_multi_num_epochs"] == 6
    assert sorted(values["network"]) == ["lstm0", "lstm1", "output"]
    assert values["branch"] == "taken" and "_helper" not in values and "numpy" not in values
    assert type(values["learning_rates"][0]) is float  # numpy scalars become Python floats


def test_unreadable_statements_bind_unevaluated_with_line_and_reason(tmp_path):
    values = read_config(_write(tmp_path, "train.config", PY_CONFIG))
    lines = PY_CONFIG.splitlines()
    schedule = values["custom_schedule"]
    assert isinstance(schedule, Unevaluated) and lines[schedule.line - 1].startswith("def custom_schedule")
    assert "function definition" in schedule.reason
    assert values["loop_value"].reason == values["k"].reason == "a `for` loop is not executed"
    assert "returnn.util.basic.NumbersDict" in values["seq_limits"].reason
    assert "`os.environ`" in values["home"].reason
    assert repr(schedule) == f"<Unevaluated 'custom_schedule' (line {schedule.line}): {schedule.reason}>"


def test_hostile_config_is_read_without_executing(tmp_path):
    marker = tmp_path / "pwned"
    text = f"""\
        #!rnn.py
        learning_rate = __import__("os").system("touch {marker}")
        handle = open("{marker}", "w")
        subclasses = ().__class__.__bases__[0].__subclasses__()
        gradient_clip = eval("1")
        optimizer = (lambda: {{"class": "adam"}})()
        mutated = {{"a": 1}}
        mutated.update(dict(b=__import__("os").system("touch {marker}")))
        uses_bad = learning_rate * 2
        big = [0] * 10**9
        cyclic = [1]
        cyclic.append(cyclic)
        """
    values = read_config(_write(tmp_path, "evil.config", textwrap.dedent(text)))
    assert not marker.exists()
    reasons = {k: v.reason for k, v in values.items()}
    assert reasons == {
        "learning_rate": "the dunder name `__import__` is not read",
        "handle": "the builtin `open` is not read",
        "subclasses": "the private attribute `.__subclasses__` is not read",
        "gradient_clip": "the builtin `eval` is not read",
        "optimizer": "a lambda is not read",
        "mutated": "the dunder name `__import__` is not read",
        "uses_bad": "`learning_rate` could not be read (line 2: the dunder name `__import__` is not read)",
        "big": f"a value of 1000000000 elements (at most {MAX_ELEMENTS})",
        "cyclic": "`cyclic.append(cyclic)` would put a value inside itself",
    }
    with pytest.raises(
        ReturnnConfigError, match=r"`learning_rate` = <Unevaluated 'learning_rate' \(line 2\).*"
    ):
        check_keys(values, "tf")


def test_json_config_with_comments_equals_returnns(tmp_path):
    text = (
        '{\n  // the rate\n  "learning_rate": 0.01, /* block */ "optimizer": {"class": "adam"},\n'
        '  "url": "http://x//y", "learning_rates": [0.1, 0.2]\n}\n'
    )
    path = _write(tmp_path, "train.json", text)
    values = read_config(path)
    assert values == _returnn(path).typed_dict
    assert values["url"] == "http://x//y" and values["optimizer"] == {"class": "adam"}


# RETURNN's `include` leaves the included file open
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_line_format_as_returnn_reads_it(tmp_path):
    _write(tmp_path, "inc.txt", "gradient_clip 2.5\n")
    lines = [
        "# old format",
        "learning_rate 0.001 # comment",
        "adam 1",
        "learning_rates 0.1,0.2,0.3",
        "task train",
        f"include {tmp_path / 'inc.txt'}",
        "learning_rate_decay 0.7",
        "newbob_relative_error_threshold -0.02",
        "learning_rate_control newbob",
    ]
    text = "\n".join(lines) + "\n"
    path = _write(tmp_path, "old.txt", text)
    values = read_config(path)
    oracle = _returnn(path)
    assert values["learning_rate"] == oracle.float("learning_rate", None) == 0.001
    assert values["adam"] is 1 and oracle.bool("adam", False) is True  # noqa: F632
    assert values["learning_rates"] == oracle.float_list("learning_rates") == [0.1, 0.2, 0.3]
    assert values["task"] == oracle.value("task", None) == "train"
    assert values["learning_rate_control"] == oracle.value("learning_rate_control", None) == "newbob"
    single = read_config(_write(tmp_path, "one.txt", "learning_rates 0.25\n"))
    assert (
        single["learning_rates"] == _returnn(str(tmp_path / "one.txt")).float_list("learning_rates") == [0.25]
    )
    assert values["gradient_clip"] == oracle.float("gradient_clip", None) == 2.5
    assert (
        values["newbob_relative_error_threshold"]
        == oracle.float("newbob_relative_error_threshold", 0)
        == -0.02
    )
    # RETURNN reads learning_rate_decay with typed_value only: the line is not used; refused when needed
    assert oracle.typed_value("learning_rate_decay") is None
    assert isinstance(values["learning_rate_decay"], Unevaluated)
    with pytest.raises(ReturnnConfigError, match="only from a Python or JSON config"):
        check_keys(values, "tf")


def test_line_format_errors_and_file_type_decision(tmp_path):
    with pytest.raises(ReturnnConfigError, match=r"line 2 of .*'lonely' has no value"):
        read_config(_write(tmp_path, "bad.txt", "a 1\nlonely\n"))
    with pytest.raises(
        ReturnnConfigError, match=r"line 1 of .*'\[\*\.lexicon\]' is the section header of a RASR"
    ):
        read_config(_write(tmp_path, "lexicon.config", "[*.lexicon]\nfile = lexicon.xml\n"))
    # a `.py` name makes it Python even without `#!`, as in RETURNN; `#!` makes any name Python
    assert read_config(_write(tmp_path, "c.py", "x = [1, 2]\n")) == {"x": [1, 2]}
    with pytest.raises(ReturnnConfigError, match=r"line 3 is not valid Python"):
        read_config(_write(tmp_path, "d.config", "#!rnn.py\nx = 1\nx = = 2\n"))
    with pytest.raises(ReturnnConfigError, match="looks like JSON but is invalid"):
        read_config(_write(tmp_path, "e.json", '{"a": }'))
    with pytest.raises(FileNotFoundError, match="config file not found"):
        read_config(str(tmp_path / "missing.config"))
    with pytest.raises(TypeError, match=r"`source` must be a path .* got int"):
        read_config(3)


def test_mapping_and_returnn_config_sources():
    schedule = lambda **kw: 1.0  # noqa: E731
    globals_ = {"learning_rate": 0.1, "dynamic_learning_rate": schedule, "_private": 1, "np": np}
    values = read_config(globals_)
    assert values == {"learning_rate": 0.1, "dynamic_learning_rate": schedule} and values is not globals_
    config = returnn_config.Config({"optimizer": {"class": "adam"}})
    config.add_line("gradient_clip", "0.5")
    assert read_config(config) == {"optimizer": {"class": "adam"}, "gradient_clip": 0.5}


def test_statements_followed_and_mutations(tmp_path):
    text = """\
        #!rnn.py
        import numpy as np
        a = b = [1, 2]
        b[0] = 5
        c = {"x": {"y": 1}}
        c["x"]["y"] += 2
        d = 1
        del d
        e: int = 4
        f = 1
        f **= 3
        if unknown_name:
            g = 1
        h = [x * 2 for x in range(3) if x != 1]
        """
    values = read_config(_write(tmp_path, "m.config", textwrap.dedent(text)))
    assert values["a"] == values["b"] == [5, 2]  # `a = b = [...]` is one list, as in Python
    assert values["c"] == {"x": {"y": 3}} and "d" not in values and values["e"] == 4 and values["f"] == 1
    assert values["g"].reason == "the name `unknown_name` is not defined earlier in the config"
    assert values["h"] == [0, 4]


RETURNN_IDIOMS = """\
#!returnn.py
config = globals()["config"]  # make PyCharm happy
task = config.value("task", "train")
beam_size = config.int("beam_size", 12)
have_beam = config.has("beam_size")
use_x = config.bool("use_x", False)
train = {"class": "Task12AXDataset", "num_seqs": 1000}
dev = train.copy()
dev.update({"num_seqs": train["num_seqs"] // 10, "fixed_random_seed": 1})
rates = [0.1]
rates.extend([0.2, 0.3])
rates.insert(0, 0.05)
network = {"a": {"class": "copy"}, "b": {"class": "copy"}, "c": {"class": "linear", "from": []}}
del network["b"]
network["c"]["from"].append("a")
network.setdefault("output", {"class": "softmax", "from": ["c"]})
threshold = config.float("threshold", "0.5")
learning_rates = config.typed_value("rates")


class Model:
    pass


def lr_schedule(*, epoch, **kwargs):
    return 0.1
"""


def test_returnn_config_idioms_equal_returnns_values(tmp_path):
    path = _write(tmp_path, "idioms.config", RETURNN_IDIOMS)
    values = read_config(path)
    oracle = _returnn(path).typed_dict
    evaluated = {k: v for k, v in values.items() if not isinstance(v, Unevaluated)}
    assert sorted(evaluated) == sorted(
        k for k in oracle if k[0] != "_" and k not in ("config", "Model", "lr_schedule")
    )
    assert evaluated == {k: oracle[k] for k in evaluated}
    assert (
        evaluated["beam_size"] == 12 and evaluated["dev"]["num_seqs"] == 100 and evaluated["threshold"] == 0.5
    )
    assert evaluated["network"]["c"]["from"] == ["a"] and evaluated["learning_rates"] == [0.05, 0.1, 0.2, 0.3]
    check_keys(values, "tf")  # `Model` and `lr_schedule` are definitions, not misspelled keys


def test_from_imports_of_numpy_and_math_are_values(tmp_path):
    text = (
        "#!rnn.py\nfrom math import pi, sqrt\nfrom numpy import linspace as ls, save\nfrom os import path\n"
    )
    text += "x = pi * 2\ny = ls(0, 1, 3)\nz = sqrt(4.0)\nw = save('f', y)\n"
    values = read_config(_write(tmp_path, "imp.config", text))
    assert {k: v for k, v in values.items() if k != "w"} == {
        "pi": np.pi,
        "x": 2 * np.pi,
        "y": [0.0, 0.5, 1.0],
        "z": 2.0,
    }
    assert values["w"].reason == "`numpy.save` is not read (of the imports, only numpy's and math's are)"


@pytest.mark.parametrize(
    "expr, expected",
    [
        ("np.linspace(1.0, 2.0, 5)", np.linspace(1.0, 2.0, 5).tolist()),
        ("np.logspace(-3, -1, num=3)", np.logspace(-3, -1, num=3).tolist()),
        ("np.arange(0, 1, 0.25).tolist()", [0.0, 0.25, 0.5, 0.75]),
        ("list(np.repeat(np.array([1.0, 2.0]), 2))", [1.0, 1.0, 2.0, 2.0]),
        ("np.concatenate([np.ones(2), np.zeros(1), np.full(1, 7.0)])", [1.0, 1.0, 0.0, 7.0]),
        ("[round(v, 3) for v in np.asarray([0.12345, 2])]", [0.123, 2.0]),
        ("sorted(reversed([3, 1, 2]))[-1] + len((1, 2)) + sum([1, 2]) + max(1, 2) + abs(-1)", 11),
        ("dict(a=1, **{'b': 2}) | {'c': int('3')}", {"a": 1, "b": 2, "c": 3}),
        ("f'{3.14159:.2f}-{\"x\"!r}' if 1 < 2 <= 2 and not None else 0", "3.14-'x'"),
        ("(1, 2, 3)[::-1] + tuple([4])", (3, 2, 1, 4)),
    ],
)
def test_safe_eval_admitted(expr, expected):
    assert safe_eval(expr, {"np": ModuleRef("numpy")}) == expected


@pytest.mark.parametrize(
    "expr, match",
    [
        ("[0] * 10**7", "10000000 elements"),
        ("'ab' * 10**6", "2000000 elements"),
        ("list(range(10**8))", "100000000 elements"),
        ("np.ones((10**4, 10**4))", "100000000 elements"),
        ("np.linspace(0, 1, num=10**8)", "100000000 elements"),
        ("np.arange(10**9)", "1000000000 elements"),
        ("[x] * 2", "over 1000000 elements"),
        ("9 ** 9 ** 9", "is over 100000 bits"),
        ("1 << 10**9", "a shift by 1000000000 bits"),
        ("'%99999999d' % 1", "huge or `\\*` width"),
        ("f'{1:>999999999}'", "too wide"),
        ("[sum(1 for j in range(1000)) for i in range(2000)]", f"over {MAX_ITERATIONS} iterations"),
        ("np.load('x.npy')", "`numpy.load` is not read"),
        ("(y := 1)", "the walrus operator"),
        ("x.append(1)", "the attribute `x.append` is not read"),
        ("''.join(['a'])", "the attribute `''.join` is not read"),
        ("getattr(x, 'pop')", "the builtin `getattr` is not read"),
        ("1 / 0", "ZeroDivisionError"),
        ("x = 1", "is not a Python expression"),
        ("np.array(['a' * 10, ''])", "`numpy.array` of text is not read"),
        ("np.ones(3, dtype='U1000000')", "the dtype 'U1000000' is not read"),
        ("(1 << 99990) * (1 << 99990)", "a product of a 99991-bit and a 99991-bit integer is over"),
        ("True << 10**9", "a shift by 1000000000 bits"),
        ("(1 << 99990) ** 2", "`<a 99991-bit integer> \\*\\* 2` is over 100000 bits"),
        (f"set(range(0, 100 * {2**61 - 1}, {2**61 - 1}))", "keys share hash values"),
        (f"{{{2**61 - 1} * i: 0 for i in range(100)}}", "keys share hash values"),
        ("list(zip(x, x))", "1200000 elements"),
        ("round(5, -10**6)", "`round` to -1000000 digits"),
        ("sum([[0] * 100] * 9000, [])", "a `sum` of sequences copying"),
        ("[1 << 99000] * 10**4", "a value of over 64 MiB"),
    ],
)
def test_safe_eval_refused(expr, match):
    with pytest.raises(ReturnnConfigError, match=match):
        safe_eval(expr, {"np": ModuleRef("numpy"), "x": [0] * 600_000})


def test_deeply_nested_values_are_refused_not_crashed(tmp_path, monkeypatch):
    # the nesting bound is under test, not the time: each statement copies and measures the value
    # (0.9 s for the read idle, over the 2 s of `MAX_SECONDS` on a loaded 2-core machine)
    monkeypatch.setattr(_safe_eval_limits, "MAX_SECONDS", 10.0)
    text = "#!rnn.py\na = []\n" + "a = [a]\n" * 1100 + "b = 1\n"
    values = read_config(_write(tmp_path, "deep.config", text))
    assert values["b"] == 1 and isinstance(values["a"], Unevaluated) and len(values["a"].reason) < 300
    with pytest.raises(ReturnnConfigError, match="nested"):
        safe_eval("[" * 3000 + "]" * 3000, {})
