"""The "From RETURNN" guide's key table is tools/returnn_keys_table.py's output (every key, per backend)."""

import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _tool():
    spec = importlib.util.spec_from_file_location(
        "returnn_keys_table", ROOT / "tools" / "returnn_keys_table.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_guides_key_table_is_current():
    tool = _tool()
    text = tool.GUIDE.read_text()
    assert tool.START in text and tool.END in text
    assert text == tool.guide_with_table(text), (
        "the key table is stale: run `python tools/returnn_keys_table.py --write`"
    )


def test_every_key_has_a_row_and_a_kind_per_backend():
    from gradtx.returnn._keys import KEYS

    table = _tool().render()
    for name, key in KEYS.items():
        assert f"| `{name}` |" in table
        assert {key.on(b)[0] for b in ("tf", "torch")} <= {"applied", "refused", "ignored"}
