"""README keeps true: its catalogue table is what tools/catalog_table.py generates from the package and
tests."""

import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _tool():
    spec = importlib.util.spec_from_file_location("catalog_table", ROOT / "tools" / "catalog_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_catalogue_table_is_current():
    tool = _tool()
    text = (ROOT / "README.md").read_text()
    assert tool.START in text and tool.END in text
    assert text == tool.readme_with_table(text), (
        "README table is stale: run `python tools/catalog_table.py --write`"
    )


def test_every_registered_optimizer_has_a_catalogue_row():
    from gradtx import registry

    tool = _tool()
    rows = {path for _, _, path, _ in tool.ROWS}
    assert sorted(set(registry.names("optimizer")) - rows) == []


def test_readme_quickstart_runs():
    text = (ROOT / "README.md").read_text()
    code = text.split("## Quickstart", 1)[1].split("```python", 1)[1].split("```", 1)[0]
    namespace: dict = {}
    exec(compile(code, "README quickstart", "exec"), namespace)
    w = namespace["params"]["w"]
    assert abs(float(w[0]) - 1.0) < 1e-2 and abs(float(w[2]) - 3.0) < 1e-2


def test_readme_data_parallel_step_runs_on_8_devices():
    text = (ROOT / "README.md").read_text()
    code = text.split("## Data parallelism", 1)[1].split("```python", 1)[1].split("```", 1)[0]
    namespace: dict = {}
    exec(compile(code.replace("range(300)", "range(150)"), "README data parallelism", "exec"), namespace)
    import jax

    assert jax.device_count() == 8
    w = namespace["params"]["w"]
    assert abs(float(w[1]) + 2.0) < 5e-2 and abs(float(w[0]) - 1.0) < 5e-2


def test_readme_packed_parameters_step_runs():
    text = (ROOT / "README.md").read_text()
    code = (
        text.split("## Sharded models and many small leaves", 1)[1]
        .split("```python", 1)[1]
        .split("```", 1)[0]
    )
    namespace: dict = {}
    exec(compile(code, "README packed parameters", "exec"), namespace)
    from gradtx import packing

    packed, state = namespace["packed"], namespace["state"]
    assert packing.is_packed(packed) and len(packed.buffers) == 1
    assert int(state[0].count) == 1 and packing.unpack(packed)["layer7"]["w"].shape == (16, 16)
