"""Save and restore optimizer states and `TrainState`s: gradtx's own `.npz` files, and TF1 checkpoints.

`save_npz` / `load_npz` store the arrays of any tree under their key paths; restoring needs
a *target* with the same structure (e.g. `tx.init(params)` or `trainer.init(params)`, or
`jax.eval_shape` of it), so NamedTuples, `None` leaves and dtypes come back exactly and a
resumed run is bit-identical. Saving is atomic (a crash leaves the old file), and loading
checks every key path, shape, dtype and state class against the target before it reads
an array; it reads regular files only (never a FIFO or a device), each read bounded by the
target. Given the transform (`save_npz(path, state, transform=tx)`), the file names it
(`transform_name`: `adam`, `nadam`, ...; a state alone does not say which transform made
it), and `load_npz` refuses it unless given the same transform (`transform=tx`): another
transform's state, though of the same layout (adam's into nadam or lazy_adam), or a call
that names none, loads only with `allow_other_transform=True`. Packed parameters and slots
(`gradtx.packing`) are stored leaf by leaf under the key paths of the leaves they hold, the
names an unpacked state gives them, so a checkpoint moves between packed and unpacked runs.
For sharded or very large states use orbax-checkpoint (`pip install gradtx[checkpoint]`):
gradtx states are plain pytrees and round-trip through `orbax.checkpoint.StandardCheckpointer`
unchanged, but for GaLore's empty projectors, which orbax refuses (see `GaLoreState`).

`from_tf1` / `to_tf1` read and write TF1 checkpoints (`tf.compat.v1.train.Saver`), with every
optimizer slot under TF's name (`dense/kernel/Adam`, `beta1_power`, `global_step`, ...), so a
TF1 training run resumes in JAX and goes back (`pip install gradtx[tf]`); `tf1_names` shows
the names without TensorFlow.
"""

from gradtx.checkpoint._common import CheckpointError, transform_name
from gradtx.checkpoint._npz import load_npz, save_npz
from gradtx.checkpoint._tf1 import from_tf1, to_tf1
from gradtx.checkpoint._tf1_names import tf1_names

__all__ = ["CheckpointError", "from_tf1", "load_npz", "save_npz", "tf1_names", "to_tf1", "transform_name"]
