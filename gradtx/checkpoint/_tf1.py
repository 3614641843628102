"""`from_tf1` / `to_tf1`: a TF1 training run continues in JAX with its optimizer slots, and goes back.

The names come from `_tf1_names` (TF's slot naming, no TensorFlow needed); TensorFlow itself,
an optional extra (`pip install gradtx[tf]`), is imported only here, when a checkpoint is
read or written. Variables a partitioner split (`w/part_0`, `w/part_1`, ...) are read whole:
a TF1 `Saver` stores them as one tensor with slices, and parts stored as variables of their
own are concatenated.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from typing import Any, Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from gradtx import packing
from gradtx._core import checks as _checks
from gradtx._core import protocol as _protocol
from gradtx.checkpoint import _common, _tf1_names
from gradtx.checkpoint._common import CheckpointError

_OPTIMIZER_NON_SLOT = re.compile(r"(beta1_power|beta2_power)(_\d+)?")


def _tensorflow(fn: str) -> Any:
    try:
        import tensorflow as tf
    except ImportError as err:
        raise ImportError(
            f"`{fn}` reads and writes TF1 checkpoints with TensorFlow, which is not installed; "
            "install it with `pip install gradtx[tf]` (tensorflow-cpu>=2.16)."
        ) from err
    return tf


def _kind(dtype: Any) -> str:
    if jnp.issubdtype(dtype, jnp.floating):
        return "float"
    return "int" if jnp.issubdtype(dtype, jnp.integer) else "other"


class _Reader:
    """A TF checkpoint's variables, read by name, with what was read remembered."""

    def __init__(self, fn: str, tf: Any, path: Any):
        self.fn, self.path = fn, os.fspath(path)
        try:
            self.reader = tf.train.load_checkpoint(self.path)
            self.shapes = self.reader.get_variable_to_shape_map()
        except Exception as err:  # TF raises NotFoundError, DataLossError, ValueError, ...
            raise CheckpointError(
                f"`{fn}`: {self.path} is not a readable TF checkpoint ({type(err).__name__}: {err})."
            ) from err
        self.used: set[str] = set()
        self.cache: dict[str, np.ndarray] = {}

    def _get(self, name: str) -> np.ndarray:
        if name not in self.cache:
            try:
                self.cache[name] = np.asarray(self.reader.get_tensor(name))
            except Exception as err:
                raise CheckpointError(
                    f"`{self.fn}`: the variable {name!r} in {self.path} cannot be read "
                    f"({type(err).__name__}: {err})."
                ) from err
            self.used.add(name)
        return self.cache[name]

    def read(self, ref: _tf1_names.Ref, shape: tuple[int, ...]) -> np.ndarray | None:
        """The value of `ref` (joined from its `part_N` variables if it was split), or None if absent."""
        if ref.name in self.shapes:
            return self._get(ref.name)
        parts: list[np.ndarray] = []
        tail = f"/{ref.suffix}" if ref.suffix else ""
        while f"{ref.var}/part_{len(parts)}{tail}" in self.shapes:
            parts.append(self._get(f"{ref.var}/part_{len(parts)}{tail}"))
        if not parts:
            return None
        for axis in range(len(shape)):
            rest = shape[:axis] + shape[axis + 1 :]
            if all(p.ndim == len(shape) and p.shape[:axis] + p.shape[axis + 1 :] == rest for p in parts):
                if sum(p.shape[axis] for p in parts) == shape[axis]:
                    return np.concatenate(parts, axis=axis)
        raise CheckpointError(
            f"`{self.fn}`: the parts of {ref.name!r} in {self.path} ({[list(p.shape) for p in parts]}) "
            f"do not make up {ref.what}, shaped {list(shape)}."
        )

    def near(self, ref: _tf1_names.Ref) -> list[str]:
        return sorted(n for n in self.shapes if n == ref.var or n.startswith(ref.var + "/"))[:8]


def _converted(fn: str, path: str, ref: _tf1_names.Ref, value: np.ndarray, like: Any) -> np.ndarray:
    shape, dtype = tuple(like.shape), like.dtype
    if tuple(value.shape) != shape:
        raise CheckpointError(
            f"`{fn}`: {ref.name!r} is {value.dtype.name}{list(value.shape)} in {path}, but {ref.what} is "
            f"{np.dtype(dtype).name}{list(shape)}."
        )
    if _kind(value.dtype) != _kind(dtype) or _kind(dtype) == "other":
        raise CheckpointError(
            f"`{fn}`: {ref.name!r} is {value.dtype.name} in {path}, which cannot hold {ref.what} "
            f"({np.dtype(dtype).name})."
        )
    if (
        _kind(dtype) == "int"
        and value.size
        and not (np.iinfo(dtype).min <= int(value.min()) and int(value.max()) <= np.iinfo(dtype).max)
    ):
        raise CheckpointError(
            f"`{fn}`: {ref.name!r} is {value} in {path}, out of the range of {np.dtype(dtype)}."
        )
    return value.astype(dtype)


def _missing_error(fn: str, reader: _Reader, missing: list[_tf1_names.Ref]) -> CheckpointError:
    lines = [
        f"{r.name!r} ({r.what}); the checkpoint has {reader.near(r)} under {r.var!r}"
        if r.kind in ("slot", "average")
        else f"{r.name!r} ({r.what})"
        for r in missing[:6]
    ]
    return CheckpointError(
        f"`{fn}`: {reader.path} has no variable " + "; no ".join(lines) + ". Is `tx` the optimizer that "
        "wrote it? Pass `name_map=` for other variable names, `optimizer_name=` if TF's optimizer was "
        "given another `name`, `slot_op_names=` for Ftrl's `accum_name` / `linear_name`."
    )


def from_tf1(
    path: str | os.PathLike,
    tx: _protocol.GradientTransformation,
    params: _protocol.Params,
    name_map: Mapping[str, str] | Callable[[str], str | None] | None = None,
    *,
    optimizer_name: str | None = None,
    slot_op_names: Mapping[str, str] | None = None,
    swapped_averages: bool = False,
    ignore: Sequence[str] = (),
) -> tuple[_protocol.Params, _protocol.OptState]:
    """Read a TF1 checkpoint's variables and optimizer slots into params and a state of `tx`.

    Each parameter is read from the TF variable named by its key path (``"dense/kernel"``
    for ``params["dense"]["kernel"]``) unless `name_map` names another; each slot from TF's
    name for it (``dense/kernel/Adam``, ``dense/kernel/Adam_1``, ...), the non-slot variables
    from theirs (``beta1_power``, ...), every step counter of the state from
    ``global_step``. `tx` must be the gradtx counterpart of the TF optimizer that wrote the
    checkpoint (`tf1_names` lists what it reads). Any slot the state needs and the file
    lacks is an error that names it, and so is any slot of these parameters (or optimizer
    variable) in the file that the state has no place for. Variables of the file that are
    no parameters' are left alone. Other state values (injected hyperparameters, ...) are
    `tx.init`'s.

    Args:
      path: the checkpoint: its prefix (``".../model.ckpt-1000"``) or its directory (the
        latest checkpoint there).
      tx: the gradtx optimizer that continues the run.
      params: a tree of the parameters (arrays or `jax.ShapeDtypeStruct` objects, packed or not):
        the structure, shapes and dtypes to read into.
      name_map: TF variable names for parameters whose key path is not their TF name, as a
        dict ``{"dense/kernel": "model/dense/kernel"}`` or a function of the key path
        (returning None for the default). It may also rename TF's non-slot variables
        (``"global_step"``, ``"beta1_power"``, ...).
      optimizer_name: the `name` the TF optimizer was given, if not its default.
      slot_op_names: per gradtx slot, the name TF created it under instead of the
        optimizer's (Ftrl's `accum_name` / `linear_name`: ``{"accum": ..., "linear": ...}``;
        ``{"averages": ...}`` for an `ExponentialMovingAverage` with another `name`).
      swapped_averages: the checkpoint was written by `MovingAverageOptimizer.swapping_saver()`
        (the averages under the variables' names, the variables under the averages').
      ignore: `fnmatch` patterns of checkpoint variables to leave out of the extra-slot check
        (e.g. ``["*/ExponentialMovingAverage"]`` to resume without the averages).

    Returns:
      `(params, state)`: the parameters (jax arrays, with the dtypes of `params`) and the
      optimizer state `tx.init` would make, filled from the checkpoint.

    Raises:
      ImportError: if TensorFlow is not installed.
      CheckpointError: (a `ValueError`) if a variable is missing, has another shape, or is
        an extra slot, or if the file is no readable TF checkpoint.
      ValueError: for a state of a transform whose TF1 names gradtx does not know, or a
        `name_map` naming no parameter.

    Example:
        >>> import os, tempfile, pytest, jax.numpy as jnp, gradtx
        >>> tf = pytest.importorskip("tensorflow")  # the optional extra: pip install gradtx[tf]
        >>> tx = gradtx.adam(1e-3)
        >>> params = {"dense": {"kernel": jnp.ones((3, 2)), "bias": jnp.zeros(2)}}
        >>> path = os.path.join(tempfile.mkdtemp(), "model.ckpt-0")
        >>> gradtx.checkpoint.to_tf1(path, tx, params, tx.init(params))  # a TF1 checkpoint to read
        >>> params, state = gradtx.checkpoint.from_tf1(path, tx, params)
        >>> gradtx.get_slot(state, "m", "dense/bias"), int(state[0].count)
        (Array([0., 0.], dtype=float32), 0)
    """
    fn = "from_tf1"
    _checks.check_transform(fn, "tx", tx)
    _checks.check_bool(fn, "swapped_averages", swapped_averages)
    tf = _tensorflow(fn)
    flat_params = jax.eval_shape(packing.unpack, params)
    abstract_state = jax.eval_shape(lambda p: packing.unpack(tx.init(p)), params)
    plan = _tf1_names.plan(
        fn, flat_params, abstract_state, name_map, optimizer_name, slot_op_names, swapped_averages
    )
    reader = _Reader(fn, tf, path)
    missing: list[_tf1_names.Ref] = []

    def fill(tree: Any, refs: list[_tf1_names.Ref]) -> Any:
        by_key = {r.key: r for r in refs}
        treedef: Any  # a PyTreeDef
        leaves, treedef = jax.tree_util.tree_flatten_with_path(tree)
        out = []
        for key_path, leaf in leaves:
            ref = by_key.get(jax.tree_util.keystr(key_path))
            value = None if ref is None else reader.read(ref, tuple(leaf.shape))
            if ref is not None and value is None:
                missing.append(ref)
            if ref is None or value is None:
                out.append(leaf)
            else:
                out.append(jnp.asarray(_converted(fn, reader.path, ref, value, leaf)))
        return treedef.unflatten(out)

    loaded = fill(flat_params, plan.params)
    if missing:
        raise _missing_error(fn, reader, missing)
    new_params = packing.repack(loaded, like=params)
    state = tx.init(new_params)
    new_state = packing.repack(fill(packing.unpack(state), plan.state), like=state)
    if missing:
        raise _missing_error(fn, reader, missing)
    _check_extra(fn, reader, plan, (ignore,) if isinstance(ignore, str) else tuple(ignore))
    return new_params, new_state


def _check_extra(fn: str, reader: _Reader, plan: _tf1_names.Plan, ignore: Sequence[str]) -> None:
    variables = {r.var for r in plan.params}
    extra = sorted(
        n
        for n in reader.shapes
        if n not in reader.used
        and n not in variables
        and (any(n.startswith(v + "/") for v in variables) or _OPTIMIZER_NON_SLOT.fullmatch(n))
        and not any(_OPTIMIZER_NON_SLOT.fullmatch(n) and n.startswith(u) for u in plan.unkept)
        and not any(fnmatch.fnmatchcase(n, pattern) for pattern in ignore)
    )
    if extra:
        raise CheckpointError(
            f"`{fn}`: {reader.path} holds optimizer variables that the state of `tx` has no place for: "
            f"{extra[:8]}. Is `tx` the optimizer that wrote it? (`ignore=` leaves such variables out.)"
        )


def _save(tf: Any, path: str, tensors: dict[str, np.ndarray]) -> None:
    def op() -> Any:
        return tf.raw_ops.SaveV2(
            prefix=path,
            tensor_names=list(tensors),
            shape_and_slices=[""] * len(tensors),
            tensors=[tf.constant(v) for v in tensors.values()],
        )

    if tf.executing_eagerly():
        op()
    else:  # called inside a TF1 graph: run the save in a graph of its own
        graph = tf.Graph()
        with graph.as_default():
            save = op()
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(save)
    directory, base = os.path.split(path)  # the "checkpoint" file: tf.train.latest_checkpoint finds it
    entry = json.dumps(base, ensure_ascii=False)
    text = f"model_checkpoint_path: {entry}\nall_model_checkpoint_paths: {entry}\n".encode()
    _common.write_atomically(os.path.join(directory, "checkpoint"), lambda f: f.write(text))


def to_tf1(
    path: str | os.PathLike,
    tx: _protocol.GradientTransformation,
    params: _protocol.Params,
    state: _protocol.OptState,
    name_map: Mapping[str, str] | Callable[[str], str | None] | None = None,
    *,
    global_step: int | None = None,
    optimizer_name: str | None = None,
    slot_op_names: Mapping[str, str] | None = None,
    swapped_averages: bool = False,
    extra: Mapping[str, Any] | None = None,
) -> None:
    """Write params and the state of `tx` as a TF1 checkpoint, every slot under TF's name.

    The inverse of `from_tf1`, with the same names: a TF1 graph that builds the TF
    counterpart of `tx` on variables of these names restores it with `Saver.restore` and
    continues the run. The step counter of the state is written as the int64
    ``global_step``; slots are written in their parameter's dtype (as TF keeps them). The
    directory's ``checkpoint`` file is updated, so `tf.train.latest_checkpoint` finds it.

    Args:
      path: the checkpoint prefix to write (``".../model.ckpt-2000"``).
      tx: the gradtx optimizer `state` belongs to.
      params: the parameters (packed or not).
      state: the state of `tx` for `params`.
      name_map: TF variable names, as for `from_tf1`.
      global_step: the ``global_step`` to write; by default the state's step counter (none
        is written when the state has none and this is None).
      optimizer_name: the `name` of the TF optimizer that will restore it, if not its default.
      slot_op_names: per gradtx slot, the name TF creates it under, as for `from_tf1`.
      swapped_averages: write the moving averages under the variables' names, as
        `MovingAverageOptimizer.swapping_saver()` does.
      extra: more variables to write, by TF name, as arrays of their variables' dtypes (a
        Python float is written as float32): e.g. the `beta2_power` that contrib's AdaMax
        creates and never reads, or model variables that are not trained.

    Raises:
      ImportError: if TensorFlow is not installed.
      ValueError: if `state` is not the state of `tx` for `params`, its step counters
        disagree, two values get the same TF name, or gradtx does not know TF1's names for
        a part of the state.

    Example:
        >>> import os, tempfile, pytest, jax.numpy as jnp, gradtx
        >>> tf = pytest.importorskip("tensorflow")  # the optional extra: pip install gradtx[tf]
        >>> tx = gradtx.momentum(0.1, 0.9)
        >>> params = {"w": jnp.ones(2)}
        >>> path = os.path.join(tempfile.mkdtemp(), "model.ckpt-0")
        >>> gradtx.checkpoint.to_tf1(path, tx, params, tx.init(params))
        >>> sorted(tf.train.load_checkpoint(path).get_variable_to_shape_map().items())
        [('global_step', []), ('w', [2]), ('w/Momentum', [2])]
    """
    fn = "to_tf1"
    _checks.check_transform(fn, "tx", tx)
    _checks.check_bool(fn, "swapped_averages", swapped_averages)
    if global_step is not None:
        _checks.check_int(fn, "global_step", global_step, minimum=0)
    tf = _tensorflow(fn)
    expected: Any = jax.tree.structure(jax.eval_shape(tx.init, params))
    if jax.tree.structure(state) != expected:
        raise _protocol.TreeMismatchError(
            f"`{fn}`: `state` is not the state of `tx` for `params`: it is {jax.tree.structure(state)}, "
            f"`tx.init(params)` makes {expected}."
        )
    flat_params, flat_state = packing.unpack(params), packing.unpack(state)
    plan = _tf1_names.plan(
        fn, flat_params, flat_state, name_map, optimizer_name, slot_op_names, swapped_averages
    )
    param_leaves = {
        jax.tree_util.keystr(p): x for p, x in jax.tree_util.tree_flatten_with_path(flat_params)[0]
    }
    dtypes = {r.param: np.asarray(param_leaves[r.key]).dtype for r in plan.params}
    state_leaves = {
        jax.tree_util.keystr(p): x for p, x in jax.tree_util.tree_flatten_with_path(flat_state)[0]
    }
    tensors: dict[str, np.ndarray] = {}
    steps: dict[str, int] = {}

    def put(name: str, value: np.ndarray, what: str) -> None:
        if name in tensors:
            raise ValueError(f"`{fn}`: two values would be written as {name!r} (the second: {what}).")
        tensors[name] = value

    for r in plan.params:
        put(r.name, np.asarray(param_leaves[r.key]), r.what)
    for r in plan.state:
        value = np.asarray(state_leaves[r.key])
        if r.kind == "step":
            steps[r.key] = int(value)
        elif r.kind in ("slot", "average"):
            put(r.name, value.astype(dtypes[r.param]), r.what)
        else:
            put(r.name, value, r.what)
    if global_step is None and len(set(steps.values())) > 1:
        raise ValueError(
            f"`{fn}`: the state's step counters differ ({steps}); TF1 has one `global_step`: "
            "pass `global_step=`."
        )
    step = global_step if global_step is not None else next(iter(steps.values()), None)
    if step is not None:
        put(plan.global_step, np.asarray(step, np.int64), "the global step")
    for name, value in (extra or {}).items():  # a Python float is a float32 variable, as in TF1
        put(name, np.asarray(value, np.float32) if isinstance(value, float) else np.asarray(value), name)
    target = os.path.abspath(os.fspath(path))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    _save(tf, target, tensors)
