"""The restricted evaluator's comprehensions (list, set, dict, generator), under the reader's caps: each
iteration counted against `MAX_ITERATIONS`, each result against the size caps."""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from gradtx.returnn._safe_eval_limits import MAX_ITERATIONS, check_count, guard_hashed, refusal


class Comprehensions:
    """The comprehension methods of `_safe_eval`'s evaluator (which provides `eval`, `scopes` and
    `iterations`)."""

    scopes: list[Any]  # the name scopes, innermost last
    iterations: int

    def eval(self, node: ast.AST) -> Any:
        raise NotImplementedError

    def _run_comprehension(self, generators: list[ast.comprehension], emit: Callable[[], None]) -> None:
        scope: dict[str, Any] = {}
        self.scopes.append(scope)
        try:
            self._loop(generators, scope, emit)
        finally:
            self.scopes.pop()

    def _loop(self, gens: list[ast.comprehension], scope: dict, emit: Callable[[], None]) -> None:
        gen = gens[0]
        if gen.is_async:
            raise refusal("an async comprehension is not read", gen.target.lineno)
        for item in self.eval(gen.iter):
            self.iterations += 1
            if self.iterations > MAX_ITERATIONS:
                raise refusal(f"comprehensions of over {MAX_ITERATIONS} iterations", gen.target.lineno)
            bind(gen.target, item, scope)
            if all(self.eval(cond) for cond in gen.ifs):
                if len(gens) > 1:
                    self._loop(gens[1:], scope, emit)
                else:
                    emit()

    def _ListComp(self, node: ast.ListComp | ast.GeneratorExp) -> list[Any]:
        out: list[Any] = []

        def emit() -> None:
            out.append(self.eval(node.elt))
            check_count(len(out), node.lineno)

        self._run_comprehension(node.generators, emit)
        return out

    _GeneratorExp = _ListComp

    def _SetComp(self, node: ast.SetComp) -> set[Any]:
        items = self._ListComp(node)  # type: ignore[arg-type]
        guard_hashed(items, node.lineno)
        return set(items)

    def _DictComp(self, node: ast.DictComp) -> dict[Any, Any]:
        pairs: list[tuple[Any, Any]] = []

        def emit() -> None:
            pairs.append((self.eval(node.key), self.eval(node.value)))
            check_count(len(pairs), node.lineno)

        self._run_comprehension(node.generators, emit)
        return dict_of(pairs, node.lineno)


def dict_of(pairs: list[tuple[Any, Any]], line: int | None) -> dict[Any, Any]:
    """`dict(pairs)`, refused when its keys share hash values (`guard_hashed`)."""
    guard_hashed([k for k, _ in pairs], line)
    return dict(pairs)


def bind(target: ast.expr, value: Any, scope: dict[str, Any]) -> None:
    if isinstance(target, ast.Name):
        scope[target.id] = value
    elif isinstance(target, (ast.Tuple, ast.List)) and not any(
        isinstance(t, ast.Starred) for t in target.elts
    ):
        values = list(value)
        if len(values) != len(target.elts):
            raise refusal(f"unpacking {len(values)} values into {len(target.elts)} names", target.lineno)
        for t, v in zip(target.elts, values, strict=True):
            bind(t, v, scope)
    else:
        raise refusal(f"the loop target `{short_source(target)}` is not read", target.lineno)


def short_source(node: ast.AST) -> str:
    """The expression's text, shortened for a message."""
    try:
        return short_text(ast.unparse(node))
    except RecursionError:
        return "..."


def short_text(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
