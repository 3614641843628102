"""RETURNN training configs as gradtx transforms: `from_returnn_config` reads a whole config (never
executing a file) and gives the update RETURNN's TensorFlow or PyTorch backend applies, its
learning-rate control (the newbob family) kept in the state and advanced by `end_epoch`.

The pieces are public too: `read_config` (the restricted reader), `keys` (every config key by
what gradtx does with it), `LearningRateControl` (the control alone), and `TORCH_OPTIMIZERS`
(`torch.optim`'s optimizers with torch's numbers, by lowercase class name).
"""

from gradtx.returnn._assemble import ReturnnState, end_epoch, from_returnn_config, learning_rate, new_network
from gradtx.returnn._common import ReturnnConfigError, ReturnnConfigWarning
from gradtx.returnn._keys import keys_of_kind as keys
from gradtx.returnn._lr_control import LearningRateControl, LearningRateControlState
from gradtx.returnn._reader import Unevaluated, read_config
from gradtx.returnn._torch_optim import OPTIMIZERS as TORCH_OPTIMIZERS

__all__ = [
    "LearningRateControl",
    "LearningRateControlState",
    "ReturnnConfigError",
    "ReturnnConfigWarning",
    "ReturnnState",
    "TORCH_OPTIMIZERS",
    "Unevaluated",
    "end_epoch",
    "from_returnn_config",
    "keys",
    "learning_rate",
    "new_network",
    "read_config",
]
