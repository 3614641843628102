"""How far apart two spellings are: the edit distance that "did you mean" suggestions rank names by
(`gradtx.get`'s registry names, `from_returnn_config`'s updater keys)."""

from __future__ import annotations


def edit_distance(a: str, b: str, *, swaps: bool = False) -> int:
    """The single-character insertions, deletions and substitutions that turn `a` into `b`; with `swaps`,
    a swap of two neighbouring characters counts as one edit too (a typo: `epsiloon`, `contorl`).

    Example:
        >>> edit_distance("AdamOptimzer", "AdamOptimizer")
        1
        >>> edit_distance("ab", "ba"), edit_distance("ab", "ba", swaps=True)
        (2, 1)
    """
    previous: list[int] = []
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            cost = min(row[j] + 1, current[j - 1] + 1, row[j - 1] + (ca != cb))
            if swaps and i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cost = min(cost, previous[j - 2] + 1)
            current.append(cost)
        previous, row = row, current
    return row[-1]
