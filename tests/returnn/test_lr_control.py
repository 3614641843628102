"""gradtx/returnn/_lr_control: RETURNN's learning-rate control, epoch by epoch equal to RETURNN's
own `returnn.learning_rate_control` driven as its engine drives it; resuming from the state's
leaves; jit; and the refusals."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from gradtx.returnn._common import ReturnnConfigError
from gradtx.returnn._lr_control import CONFIG_KEYS, LearningRateControl, end_epoch, learning_rate_for

returnn_config = pytest.importorskip("returnn.config")
returnn_lrc = pytest.importorskip("returnn.learning_rate_control")


def _walk(seed: int, n: int = 26) -> list[float]:
    """Scores that improve, stall and get worse at random."""
    steps = np.random.default_rng(seed).standard_normal(n)
    return [float(x) for x in 2.0 * np.exp(np.cumsum(-0.01 + 0.02 * steps))]


IMPROVE = [2.0 * 0.9**e for e in range(14)]
STALL = IMPROVE[:5] + [IMPROVE[4] * (1 - 0.001 * e) for e in range(9)]
SLOW = [2.0 * 0.98**e for e in range(24)]
WORSE = [1.0 + 0.05 * e for e in range(12)]
ALTERNATE = [1.0 if e % 2 else 1.3 for e in range(16)]
WALK = _walk(0)


def _dev(seq: list[float]) -> list[dict[str, float]]:
    return [
        {"train_score": 1.1 * s + 0.02 * (e % 4), "dev_score": s, "dev_error": s / 3 + 0.01 * (e % 3)}
        for e, s in enumerate(seq)
    ]


def _returnn(config: dict, epochs: list) -> list[float]:
    """RETURNN's rates for epochs 1..len(epochs)+1, asked and scored the way its TF engine does."""
    control = returnn_lrc.load_learning_rate_control_from_config(returnn_config.Config(dict(config)))
    rates = []
    for epoch, scores in enumerate(epochs, start=1):
        rates.append(control.get_learning_rate_for_epoch(epoch))  # init_train_epoch
        if isinstance(scores, float):  # the old format, as RETURNN loads it from a file
            control.set_epoch_error(epoch, {"old_format_score": scores})
        elif scores:  # train scores after training, then the eval datasets' ones
            for part in (True, False):
                error = {k: v for k, v in scores.items() if k.startswith("train") == part}
                if error:
                    control.set_epoch_error(epoch, error)
    rates.append(control.get_learning_rate_for_epoch(len(epochs) + 1))
    return rates


def _gradtx(config: dict, epochs: list) -> tuple[list[float], list[float]]:
    """gradtx's rates (float64 from the history, float32 as the optimizer gets it)."""
    state = LearningRateControl.from_config(config).init()
    exact, f32 = [state.rate_history()[-1]], [float(learning_rate_for(state))]
    for scores in epochs:
        state = end_epoch(state, scores)
        exact.append(state.rate_history()[-1])
        f32.append(float(state.learning_rate))
    return exact, f32


def _check(config: dict, epochs: list, returnn_config_: dict | None = None) -> list[float]:
    expected = _returnn(returnn_config_ or config, epochs)
    exact, f32 = _gradtx(config, epochs)
    np.testing.assert_array_equal(exact, expected)  # float64, bit for bit
    np.testing.assert_allclose(f32, expected, rtol=1e-6)
    return expected


NEWBOB = {"learning_rate_control": "newbob", "learning_rate": 1.0, "learning_rate_growth": 1.2}
MULTI = {"learning_rate_control": "newbob_multi_epoch", "learning_rate": 1.0, "newbob_multi_num_epochs": 3}
MULTI |= {"newbob_multi_update_interval": 2, "learning_rate_growth": 1.1}

# (base config, the keys changed, scores): equal to RETURNN, and different from the base's rates
CASES = [
    ({"learning_rate": 0.3}, {"learning_rates": [0.1, 0.2, 0.25]}, _dev(WALK)),
    ({"learning_rate": 0.3}, {"learning_rates": {1: 0.1, 5: 0.05, 9: 0.2}}, _dev(WALK)),
    ({"learning_rate": 0.3}, {"learning_rates": "{2: 0.01, 4: 0.02}"}, _dev(WALK)),
    ({"learning_rate": 0.3}, {"learning_rate_control": "newbob"}, _dev(STALL)),
    (NEWBOB, {"learning_rate": 0.5}, _dev(WALK)),
    (NEWBOB, {"learning_rate_decay": 0.7}, _dev(WALK)),
    (NEWBOB, {"newbob_learning_rate_decay": 0.8}, _dev(WALK)),
    (NEWBOB, {"learning_rate_decay": None}, _dev(WALK)),
    (NEWBOB, {"learning_rate_growth": 1.05}, _dev(WALK)),
    ({"learning_rate_control": "newbob_rel"}, {"newbob_learning_rate_growth": 1.1}, _dev(ALTERNATE)),
    (NEWBOB, {"newbob_relative_error_threshold": 0.01}, _dev(WALK)),
    (NEWBOB, {"min_learning_rate": 0.3}, _dev(WORSE)),
    (
        NEWBOB | {"newbob_relative_error_threshold": -0.25},
        {"newbob_relative_error_div_by_old": True},
        _dev(ALTERNATE),
    ),
    (
        NEWBOB | {"newbob_relative_error_threshold": -0.02},
        {"learning_rate_control_relative_error_relative_lr": 1},
        _dev(IMPROVE),
    ),
    (NEWBOB, {"learning_rate_control_min_num_epochs_per_new_lr": 3}, _dev(WALK)),
    (NEWBOB, {"learning_rates": [0.1, 0.3, 0.6]}, _dev(WALK)),
    (NEWBOB, {"learning_rate_control_error_measure": "dev_error"}, _dev(WALK)),
    (NEWBOB, {"learning_rate_control_error_measure": ["train_score", "dev_score"]}, _dev(WALK)),
    (NEWBOB, {"learning_rate_control": "newbob_abs"}, _dev(WALK)),
    (NEWBOB | {"learning_rate_control": "newbob_abs"}, {"newbob_error_threshold": -0.03}, _dev(WALK)),
    (NEWBOB, {"learning_rate_control": "newbob_multi_epoch"}, _dev(WALK)),
    (MULTI, {"newbob_multi_num_epochs": 2}, _dev(WALK)),
    (MULTI, {"newbob_multi_update_interval": 1}, _dev(WALK)),
    (MULTI, {"newbob_relative_error_grow_threshold": -0.03}, _dev(SLOW)),
    (MULTI, {"learning_rate_control_relative_error_relative_lr": True}, _dev(SLOW)),
    (MULTI, {"learning_rate_control_min_num_epochs_per_new_lr": 4}, _dev(_walk(3))),
]


@pytest.mark.parametrize(("base", "change", "epochs"), CASES, ids=lambda v: str(v)[:40])
def test_each_key_equals_returnn_and_changes_the_rates(base: dict, change: dict, epochs: list) -> None:
    assert set(change) <= LearningRateControl.from_config(base | change).applied_keys <= CONFIG_KEYS
    rates = _check(base | change, epochs)
    assert rates != _check(base, epochs)


def test_error_measure_key_choice() -> None:
    # "dev_error" missing in some epochs: the key changes, RETURNN compares nothing across the change
    epochs: list = [
        {"dev_score": s, "train_score": s} | ({"dev_error": s / 2} if e % 4 else {})
        for e, s in enumerate(WALK)
    ]
    config = NEWBOB | {"learning_rate_control_error_measure": ["dev_error", "dev_score"]}
    assert _check(config, epochs) != _check(
        NEWBOB | {"learning_rate_control_error_measure": "dev_score"}, epochs
    )
    # a key no epoch has: "dev_score" as without one; none of the defaults: the smallest "dev_" key
    _check(NEWBOB | {"learning_rate_control_error_measure": "dev_wer"}, epochs)
    torch_style = [{"train_loss_ce": s, "dev_loss_fer": 1 / s, "dev_loss_ce": s} for s in WALK]
    assert len(set(_check(NEWBOB, torch_style))) >= 2
    only_train = [{"train_score": s, "train_error": 1 / s} for s in WALK]
    assert _check(NEWBOB, only_train) != _check(NEWBOB, [{"train_error": 1 / s} for s in WALK])


def test_scores_old_format_none_and_nested() -> None:
    _check(NEWBOB, [float(s) for s in ALTERNATE])
    gaps = [None if e % 5 == 2 else {"dev_score": s} for e, s in enumerate(WALK)]
    assert _check(NEWBOB, gaps) != _check(NEWBOB, _dev(WALK))
    _check(MULTI, gaps)
    nested = [
        {"dev_score": {"cost:out1": s, "cost:out2": 2 - s}, "dev_error": {"error:output": s / 2}}
        for s in WALK
    ]
    for measure in ("dev_score_out2", "dev_error", None):
        _check(NEWBOB | {"learning_rate_control_error_measure": measure}, nested)


def test_nan_and_zero_scores() -> None:
    nan = float("nan")
    _check(NEWBOB, [{"dev_score": nan if e in (4, 9, 10) else s} for e, s in enumerate(WALK)])
    _check(MULTI, [{"dev_score": nan if e == 6 else s} for e, s in enumerate(WALK)])
    # a zero score: RETURNN's Python division raises; gradtx divides as IEEE does (-inf, then NaN: grow)
    zeros = [{"dev_score": 1.0}, {"dev_score": 0.0}, {"dev_score": 0.0}]
    with pytest.raises(ZeroDivisionError):
        _returnn(NEWBOB, zeros)
    assert _gradtx(NEWBOB, zeros)[0] == [1.0, 1.0, 1.2, 1.2 * 1.2]


def test_keys_returnn_does_not_read_for_the_kind_are_ignored() -> None:
    inert = {
        "learning_rate_decay": lambda lr: lr,
        "newbob_error_threshold": "x",
        "newbob_multi_num_epochs": 0.5,
    }
    base = {"learning_rate": 0.1, "learning_rates": [0.2]}
    assert LearningRateControl.from_config(base | inert) == LearningRateControl.from_config(base)
    assert _check(base | inert, _dev(WALK[:6])) == [0.2] * 7


@pytest.mark.parametrize("kind", ["constant", "newbob_abs", "newbob"])
def test_keys_not_applied_do_not_change_the_rates(kind: str) -> None:
    base = NEWBOB | {"learning_rate_control": kind}
    applied = LearningRateControl.from_config(base).applied_keys
    other = {"min_learning_rate": 0.9, "learning_rate_control_error_measure": "train_score"}
    other |= {
        "learning_rate_control_relative_error_relative_lr": True,
        "newbob_relative_error_div_by_old": True,
    }
    other |= {
        "learning_rate_decay": 0.1,
        "newbob_error_threshold": 0.5,
        "newbob_relative_error_threshold": 0.5,
    }
    other |= {"newbob_multi_num_epochs": 1, "newbob_relative_error_grow_threshold": -1.0}
    inert = {k: v for k, v in other.items() if k not in applied}
    assert len(inert) >= 3 and set(inert) | applied <= CONFIG_KEYS
    assert _check(base | inert, _dev(ALTERNATE)) == _check(base, _dev(ALTERNATE))


def test_config_values_as_returnn_parses_them() -> None:
    # a str float, ints for floats, an int for a bool (RETURNN's own control needs floats for the rates)
    ours = NEWBOB | {"learning_rate": "0.5", "min_learning_rate": 0, "learning_rate_decay": 1}
    ours |= {"newbob_relative_error_div_by_old": 1, "learning_rates": {3: 1}}
    theirs = NEWBOB | {"learning_rate": "0.5", "learning_rate_decay": 1.0}
    theirs |= {"newbob_relative_error_div_by_old": True, "learning_rates": {3: 1.0}}
    assert len(set(_check(ours, _dev(WALK), theirs))) >= 2


def test_resume_from_leaves_equals_the_uninterrupted_run() -> None:
    config = MULTI | {"learning_rate_control_min_num_epochs_per_new_lr": 2}
    control, epochs = LearningRateControl.from_config(config), _dev(WALK)
    state = control.init()
    for scores in epochs[:9]:
        state = end_epoch(state, scores)
    saved = [np.array(leaf) for leaf in jax.tree.leaves(state)]  # as a checkpoint holds them
    resumed = jax.tree.unflatten(jax.tree.structure(control.init()), saved)
    rates = [resumed.rate_history()[-1]]
    for scores in epochs[9:]:
        resumed = end_epoch(resumed, scores)
        rates.append(resumed.rate_history()[-1])
    uninterrupted = _check(config, epochs)
    assert rates == uninterrupted[9:] and len(set(rates)) >= 3
    assert int(resumed.epoch) == len(epochs) + 1


def test_state_is_a_pytree_that_jits_and_end_epoch_is_pure() -> None:
    state = LearningRateControl.from_config(NEWBOB).init()
    for scores in _dev(WALK)[:5]:
        state = end_epoch(state, scores)
    out = jax.jit(lambda s: s)(state)
    assert jax.tree.structure(out) == jax.tree.structure(state)
    for a, b in zip(jax.tree.leaves(out), jax.tree.leaves(state), strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    assert [x.dtype.name for x in jax.tree.leaves(state)] == ["int32", "float32", "uint32", "uint32", "int32"]
    assert hash(state.control) == hash(LearningRateControl.from_config(NEWBOB))
    before = [np.asarray(x) for x in jax.tree.leaves(state)]
    first, second = end_epoch(state, {"dev_score": 9.0}), end_epoch(state, {"dev_score": 9.0})
    for a, b in zip(before, jax.tree.leaves(state), strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(first.rate_history(), second.rate_history())
    with pytest.raises(TypeError, match=r"`end_epoch`: the state is traced"):
        jax.jit(lambda s: end_epoch(s, 1.0).learning_rate)(state)
    with pytest.raises(TypeError, match=r"`end_epoch`: score 'dev_score' must be a number, got 'x'"):
        end_epoch(state, {"dev_score": "x"})


@pytest.mark.parametrize(
    ("config", "match"),
    [
        (
            {"learning_rate_control": "newbob_relativ"},
            r"`learning_rate_control` = 'newbob_relativ'.*'newbob_relative'",
        ),
        ({"learning_rate_control": "newbob_multi"}, r"Did you mean 'newbob_multi_epoch'"),
        (
            NEWBOB | {"learning_rate_decay": lambda lr: lr / 2},
            r"`learning_rate_decay` = <function.*without running",
        ),
        (
            {"learning_rate_control": "newbob_abs", "newbob_learning_rate_growth": abs},
            r"`newbob_learning_rate_growth` = .*write the factor as a float",
        ),
        ({"learning_rates": "[0.1] * 3"}, r"`learning_rates` = '\[0.1\] \* 3'.*only a literal"),
        ({"learning_rates": "[0.1, 0.2]"}, r"`learning_rates` = .*evaluate to a dict"),
        ({"learning_rate": -0.1}, r"`learning_rate` = -0.1: a learning rate must be finite and >= 0"),
        ({"learning_rate": "nan"}, r"`learning_rate` = 'nan': a learning rate must be finite"),
        ({"min_learning_rate": float("inf")}, r"`min_learning_rate` = inf"),
        ({"learning_rates": [0.1, -0.2]}, r"epoch 2: the rate -0.2 must be a finite number >= 0"),
        ({"learning_rates": {0: 0.1}}, r"epoch 0: epochs are whole numbers >= 1"),
        (NEWBOB | {"learning_rate_decay": -0.5}, r"`learning_rate_decay` = -0.5: the factor must be finite"),
        ({"learning_rate": None}, r"`learning_rate` = None: RETURNN reads this key as a float"),
        (
            MULTI | {"newbob_multi_num_epochs": 2.0},
            r"`newbob_multi_num_epochs` = 2.0: RETURNN reads this key as an int",
        ),
        ({"newbob_relative_error_div_by_old": "yes"}, r"as a bool; write True or False"),
        ({"learning_rate_control_error_measure": 3}, r'write a score key such as "dev_error"'),
        (
            MULTI | {"newbob_multi_update_interval": 0},
            r"`newbob_multi_update_interval` = 0: RETURNN asserts >= 1",
        ),
        (MULTI | {"newbob_relative_error_grow_threshold": 0.0}, r"decay and grow at once"),
    ],
)
def test_refusals(config: dict, match: str) -> None:
    with pytest.raises(ReturnnConfigError, match=r"^`from_returnn_config`: .*" + match):
        LearningRateControl.from_config(config)
