"""`read_config`: a RETURNN config file read into its values, without executing it.

The format is decided as RETURNN's `Config.load_file` decides it: content starting with `#!`, or a
file named `*.py`, is Python; content starting with `{` is JSON (with `//` and `/* */` comments);
anything else is RETURNN's old line format (`key value` lines, `#` comments, `include file`).

A Python config is parsed with `ast` and its top-level statements are walked in order:
assignments (also `a = b = ...`, tuple targets, `+=` and the other augmented operators,
`name[key] = ...` into a value read before) are evaluated by `_safe_eval.safe_eval` with the names
so far; imports are recorded (only numpy's and math's names are usable in expressions). Whatever
cannot be evaluated -- a `def`, a `class`, a loop, `with`/`try`, a refused expression, a method call
that changes a value (`network.update(...)`) -- binds each name it assigns, defines or changes to an
`Unevaluated` marker, so only the keys the update needs raise later (`_keys.check_keys`). An `if`
whose test evaluates is followed into the branch taken; one whose test does not evaluate makes its
names `Unevaluated`. Statements that bind nothing (`print(...)`, `sys.path.insert(...)`) are skipped;
so is a call that could change any name, but not silently: `exec(...)`, `globals()[...] = ...`,
`globals().update(...)`, `config.set(...)` and `from m import *` warn (`ReturnnConfigWarning`) naming
the line, and the names they set, where the statement names them, are read as `Unevaluated`.

A read is bounded (`_safe_eval_limits`, `_reader_files`): its files are regular UTF-8 files of at most
`MAX_CONFIG_BYTES` together, includes nest at most `MAX_INCLUDE_DEPTH` deep (a cycle is refused naming
it), and parsing and evaluation take at most `MAX_SECONDS` and build at most `MAX_BUILT_BYTES`; the
refusal names the budget. A message quotes a short part of the config's own lines, never the content of a
file it includes.
"""

from __future__ import annotations

import json
import os
import re
import types
from collections.abc import Mapping
from typing import Any

from gradtx.returnn._common import ReturnnConfigError
from gradtx.returnn._reader_files import MAX_CONFIG_BYTES as MAX_CONFIG_BYTES
from gradtx.returnn._reader_files import MAX_INCLUDE_DEPTH, read_text
from gradtx.returnn._reader_python import CLASS_DEFINITION as CLASS_DEFINITION
from gradtx.returnn._reader_python import FUNCTION_DEFINITION as FUNCTION_DEFINITION
from gradtx.returnn._reader_python import ConfigRef, PythonReader, Unevaluated, over_caps
from gradtx.returnn._safe_eval import ModuleRef, safe_eval
from gradtx.returnn._safe_eval_limits import Budget, BudgetExceeded

# Keys RETURNN reads only from a typed (Python or JSON) config: in the line format it ignores them
# (`config.typed_value`), or reads them as a string it cannot use.
_TYPED_ONLY = frozenset(
    {"optimizer", "dynamic_learning_rate", "learning_rate_decay", "learning_rate_growth", "grad_scaler"}
    | {
        "newbob_learning_rate_decay",
        "newbob_learning_rate_growth",
        "num_allowed_consec_invalid_gradient_steps",
    }
    | {"extra_updates", "param_groups_custom"}
)
_LIST_KEYS = frozenset({"learning_rates"})  # read with `Config.float_list`: a list even of one value


def read_config(source: Any) -> dict[str, Any]:
    """The values of a RETURNN config, read as RETURNN reads the file, without executing it.

    Args:
      source: the path of a config file (`str` or `os.PathLike`), or a `Mapping` of the config's
        globals (returned as a plain dict copy, values untouched), or a `returnn.config.Config`
        (its typed values, and its line-format values converted as below).

    Returns:
      A dict of the config's public names (no leading `_`; imports left out) to their values:
      plain Python values, `Unevaluated` where a value could not be computed. Line-format values
      are numbers or bools where the text is one (`0.01`, `1`, `true`), else strings, and lists
      where the line holds commas, as RETURNN's `Config.float`/`bool`/`list` read them; the keys
      RETURNN only reads from a typed config (`optimizer`, `learning_rate_decay`, ...) are
      `Unevaluated` there. A line-format `include` loads the named files (relative to the working
      directory, as RETURNN, else to the including file's directory).

    Raises:
      FileNotFoundError: when the file does not exist.
      ReturnnConfigError: when a JSON config is invalid or nested too deeply, a line has no value, the
        file is not valid Python (RETURNN would fail too), not a regular file, or not UTF-8 text, or
        the includes form a cycle or nest over `MAX_INCLUDE_DEPTH` deep; a `BudgetExceeded` (a
        `ReturnnConfigError`) names the budget a read went over: `MAX_CONFIG_BYTES` of files,
        `MAX_SECONDS`, `MAX_BUILT_BYTES`.
      TypeError: for a source of another type.

    Warns:
      ReturnnConfigWarning: for a statement that sets config names RETURNN would see and the reader
        does not run (`exec(...)`, `globals()[...] = ...`, `config.set(...)`, `from m import *`).

    Example:
        >>> import pathlib, tempfile
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "lr.config"
        >>> _ = path.write_text("#!rnn.py\\nimport numpy\\nlearning_rates = [0.1] * 2\\ndef f(): pass\\n")
        >>> read_config(path)
        {'learning_rates': [0.1, 0.1], 'f': <Unevaluated 'f' (line 4): a function definition is not executed>}
    """
    if isinstance(source, Mapping):
        return _public(dict(source))
    if hasattr(source, "typed_dict") and hasattr(source, "dict"):  # a returnn.config.Config
        loader = _Loader()
        loader.untyped.update({k: list(v) for k, v in source.dict.items()})
        loader.typed.update(source.typed_dict)
        return loader.result()
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(
            "`read_config`: `source` must be a path (str or os.PathLike) or a Mapping of the config's "
            f"values, got {type(source).__name__}."
        )
    loader = _Loader()
    loader.load_file(os.fspath(source))
    over_caps(loader.typed, loader.budget)
    return loader.result()


class _Loader:
    """RETURNN's `Config`: `typed` holds Python/JSON values, `untyped` the line format's strings; `budget`
    is the read's, `includes` the chain of files being read (each with the line that includes the next)."""

    def __init__(self) -> None:
        self.typed: dict[str, Any] = {}
        self.untyped: dict[str, list[str]] = {}
        self.budget = Budget()
        self.includes: list[tuple[str, str, int]] = []  # (real path, name, line of its include)

    def load_file(self, filename: str, where: str = "") -> None:
        """Load `filename`; `where` says where it is included (and that its content is not quoted)."""
        self.budget.step(None)
        raw = read_text(filename, self.budget, where=where)
        outer, self.budget.where = self.budget.where, repr(filename)
        content = raw.strip()
        if content.startswith("#!") or filename.endswith(".py"):
            PythonReader(self.typed, filename, self.budget, quote=not where).run(
                content, first_line=raw[: len(raw) - len(raw.lstrip())].count("\n")
            )
        elif content.startswith("{"):
            self.load_json(content, filename)
        else:
            self.load_lines(content, filename, quote=not where)
        self.budget.where = outer

    def load_json(self, content: str, filename: str) -> None:
        content = _json_remove_comments(content)
        try:
            values = json.loads(content)
        except ValueError as e:
            raise ReturnnConfigError(
                f"`read_config`: {filename!r} looks like JSON but is invalid: {e}."
            ) from None
        except RecursionError:
            raise ReturnnConfigError(
                f"`read_config`: the JSON config {filename!r} is nested {_json_depth(content)} levels deep, "
                "deeper than Python's `json` module parses (RETURNN's `load_json` fails on it with "
                "RecursionError too)."
            ) from None
        if not isinstance(values, dict):
            raise ReturnnConfigError(f"`read_config`: the JSON config {filename!r} must be an object.")
        self.typed.update(values)

    def load_lines(self, content: str, filename: str, *, quote: bool) -> None:
        for number, line in enumerate(content.splitlines(), 1):
            self.budget.step(number)
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split(None, 1)
            text = f"{_short(line)!r} " if quote else "the line "  # an included file is not quoted
            if line.startswith("[") and line.endswith("]"):
                raise ReturnnConfigError(
                    f"`read_config`: line {number} of {filename!r}{self._included()}: {text}is the section "
                    "header of a RASR (Sprint) config, which RETURNN does not read as its own config: pass "
                    "RETURNN's config."
                )
            if len(parts) != 2:
                raise ReturnnConfigError(
                    f"`read_config`: line {number} of {filename!r}{self._included()}: {text}has no value "
                    "(the line format is `key value`)."
                )
            self.add_line(parts[0], parts[1], filename, number, quote=quote)

    def add_line(self, key: str, value: str, filename: str, number: int, *, quote: bool = True) -> None:
        """RETURNN's `Config.add_line`: a typed key is re-typed by evaluating the text (here: safely)."""
        if key in self.typed:
            if isinstance(self.typed[key], str):
                self.typed[key] = value
                return
            try:
                self.typed[key] = safe_eval(value, {}, self.budget)
            except BudgetExceeded:
                raise
            except ReturnnConfigError as e:
                reason = str(e) if quote else "its value is not an expression the reader evaluates"
                self.typed[key] = Unevaluated(key, f"line {number} of {filename!r}: {reason}", None)
            return
        values = value.split(",") if value.find(",") > 0 else [value]
        if key == "include":
            for name in values:
                self.include(name, filename, number)
        else:
            self.untyped[key] = values

    def include(self, name: str, filename: str, number: int) -> None:
        """RETURNN's `include name` (relative to the working directory, else to the including file's)."""
        near = os.path.join(os.path.dirname(filename), name)
        path = name if os.path.exists(name) or not os.path.exists(near) else near
        real = os.path.realpath(path)
        chain = [*self.includes, (os.path.realpath(filename), filename, number)]
        if any(real == outer for outer, _, _ in chain):
            cycle = " -> ".join(
                f"{f!r} (line {n})" for _, f, n in chain[[r for r, _, _ in chain].index(real) :]
            )
            raise ReturnnConfigError(
                f"`read_config`: line {number} of {filename!r} includes {path!r}, which is being read: the "
                f"includes form a cycle, {cycle} -> {path!r} (RETURNN recurses until RecursionError): "
                "remove one of them."
            )
        if len(chain) > MAX_INCLUDE_DEPTH:
            raise ReturnnConfigError(
                f"`read_config`: line {number} of {filename!r} includes {path!r} at depth {len(chain) + 1}; "
                f"includes nest at most {MAX_INCLUDE_DEPTH} deep (`MAX_INCLUDE_DEPTH`): the chain starts "
                f"{' -> '.join(repr(f) for _, f, _ in chain[:3])} -> ..."
            )
        self.includes = chain
        try:
            self.load_file(path, where=f"included from line {number} of {filename!r}")
        finally:
            self.includes = chain[:-1]

    def _included(self) -> str:
        return (
            f" (included from line {self.includes[-1][2]} of {self.includes[-1][1]!r})"
            if self.includes
            else ""
        )

    def result(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, values in self.untyped.items():
            if key in _TYPED_ONLY:
                out[key] = Unevaluated(
                    key, "RETURNN reads it only from a Python or JSON config, not from the line format", None
                )
            else:
                converted = [_line_value(v) for v in values]
                out[key] = converted[0] if len(converted) == 1 and key not in _LIST_KEYS else converted
        out.update(self.typed)
        return _public(out)


def _public(values: dict[Any, Any]) -> dict[str, Any]:
    """The config keys: no `_` names, no imports, not the `config` object RETURNN adds to a Python config."""
    return {
        str(k): v
        for k, v in values.items()
        if not str(k).startswith("_")
        and not isinstance(v, (ModuleRef, ConfigRef, types.ModuleType))
        and not (k == "config" and hasattr(v, "typed_dict"))
    }


def _line_value(text: str) -> Any:
    """A line-format value as RETURNN's `Config.int`/`float`/`bool` would read it; else the string."""
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return {"true": True, "yes": True, "on": True, "false": False, "no": False, "off": False}.get(
        text.lower(), text
    )


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _json_depth(text: str) -> int:
    """How deeply the JSON text's arrays and objects nest (brackets inside strings not counted)."""
    depth = deepest = 0
    for match in re.finditer(r'"(?:\\.|[^"\\])*(?:"|\\?\Z)|[\[\]{}]', text):
        bracket = match.group()
        if bracket in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif bracket in "]}":
            depth -= 1
    return deepest


def _json_remove_comments(text: str) -> str:
    """JSON with `//` and `/* */` comments outside strings removed (RETURNN's `json_remove_comments`; an
    unterminated string or comment runs to the end, so the scan is linear where RETURNN's regex is
    quadratic)."""
    return re.sub(
        r'("(?:\\.|[^"\\])*(?:"|\\?\Z))|//[^\n]*|/\*.*?(?:\*/|\Z)',
        lambda m: m.group(1) or "",
        text,
        flags=re.S,
    )
