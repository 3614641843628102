"""gradtx/registry.py: names, TF class names, optimize_loss strings, TF argument names."""

import dataclasses
import inspect

import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx import registry
from tests import catalog, helpers


def _same(a, b):
    params = {"w": jnp.arange(3.0)}
    grads = [{"w": jnp.array([1.0, -2.0, 0.5])}] * 3
    helpers.assert_trees_close(
        helpers.run(a, params, grads)[0], helpers.run(b, params, grads)[0], rtol=0, atol=0
    )


@pytest.mark.parametrize("name", ["momentum", "Momentum", "MomentumOptimizer", "MOMENTUM"])
def test_tf_class_and_optimize_loss_names_build_the_same_transform(name):
    _same(gradtx.get(name, learning_rate=0.1, momentum=0.9), gradtx.momentum(0.1, 0.9))


@pytest.mark.parametrize(
    "name", ["sgd", "SGD", "gradient_descent", "GradientDescent", "GradientDescentOptimizer"]
)
def test_gradient_descent_names(name):
    _same(gradtx.get(name, learning_rate=0.1), gradtx.sgd(0.1))


def test_tf_argument_names_are_translated():
    _same(
        gradtx.get(
            "MomentumOptimizer",
            learning_rate=0.1,
            momentum=0.9,
            use_nesterov=True,
            use_locking=False,
            name="M",
        ),
        gradtx.momentum(0.1, 0.9, nesterov=True),
    )


def test_unknown_name_suggests_close_names():
    with pytest.raises(
        KeyError, match=r"unknown optimizer or transform 'Momentun'\. Did you mean 'momentum'"
    ):
        gradtx.get("Momentun")
    with pytest.raises(ValueError, match=r"unknown optimizer"):  # also a ValueError, as optimize_loss raises
        gradtx.get("nothing_like_it")


@pytest.mark.parametrize(
    "misspelled, first",
    [
        ("AdamOptimzer", "AdamOptimizer"),  # a TF class name, spelled as TF spells it
        ("adam_optimiser", "AdamOptimizer"),
        ("MomentumOptimiser", "MomentumOptimizer"),
        ("AdagradOptimzer", "AdagradOptimizer"),
        ("GradientDecent", "GradientDescent"),
        ("lazyadm", "lazy_adam"),  # underscores do not count
        ("RMS_Prop_opt", "rmsprop"),
        ("Adamm", "adam"),  # a tie (`adamw` is as close) goes by the spelling
    ],
)
def test_an_unknown_name_suggests_the_closest_spelling_first(misspelled, first):
    with pytest.raises(
        KeyError, match=rf"unknown optimizer or transform '{misspelled}'\. Did you mean '{first}'"
    ):
        gradtx.get(misspelled)


@pytest.mark.parametrize(
    "name, built", [("adam_w", "adamw"), ("lamb", "lamb"), ("LAMB", "lamb"), ("Lamb_Optimizer", "lamb")]
)
def test_case_underscores_and_a_trailing_optimizer_do_not_matter(name, built):
    assert registry.entry(name).name == built


def test_a_suggestion_names_each_entry_once_and_far_names_not_at_all():
    with pytest.raises(KeyError, match=r"Did you mean 'momentum', 'momentumw'\? All names"):
        gradtx.get("Momentun")  # not also as 'Momentum', its alias
    with pytest.raises(KeyError, match=r"unknown optimizer or transform 'xyzzy'\. All names"):
        gradtx.get("xyzzy")


def test_unknown_and_duplicated_arguments_are_errors():
    with pytest.raises(
        TypeError, match=r"`gradtx.get\('momentum'\)`: unknown argument `beta1`; `momentum` takes"
    ):
        gradtx.get("momentum", learning_rate=0.1, momentum=0.9, beta1=0.9)
    with pytest.raises(
        TypeError, match=r"unknown argument `beta_1`; `adam` takes .*\. Did you mean `beta1` or `beta2`\?"
    ):
        gradtx.get("AdamOptimizer", beta_1=0.9)  # Keras' spelling: the message points to TF's
    with pytest.raises(TypeError, match=r"`nesterov` is given twice \(as `nesterov` and as `use_nesterov`\)"):
        gradtx.get("momentum", learning_rate=0.1, momentum=0.9, nesterov=True, use_nesterov=True)
    with pytest.raises(TypeError, match=r"`b1` is given twice \(as `beta1` and as `b1`\)"):
        gradtx.get("adam", beta1=0.9, b1=0.8)


def test_optimizer_names_lists_the_registered_optimizers():
    assert {"sgd", "momentum"} <= set(gradtx.OPTIMIZER_NAMES)
    assert list(gradtx.OPTIMIZER_NAMES) == sorted(gradtx.OPTIMIZER_NAMES)
    assert all(registry.entry(n).kind == "optimizer" for n in gradtx.OPTIMIZER_NAMES)


def test_every_public_factory_is_registered():
    """A factory exported at the top level is in the registry, so it joins the contract suite."""
    not_factories = {
        "apply_updates",
        "chain",
        "named_chain",
        "stateless",
        "get",
        "with_extra_args_support",
        "update_rule",  # the constructor of building blocks: every rule it builds is registered
        "low_bit_state",  # a transform's slots in fewer bits: tests/test_lowbit.py runs it over the registry
        "from_config",
        "inject_hyperparams",  # a factory of factories: the contract suite runs it over every entry
        "optimize_loss",
        "minimize",
        "compute_gradients",
        "apply_gradients",
        "get_slot",
        "slot_names",
        "slots",
        "averaged_params",
        "swap_averaged",  # read a moving_average state
        "schedule_free_eval_params",  # read a schedule-free state
        "slow_params",  # reads a lookahead state
        "global_norm",  # a function of a tree
        "per_example_global_norm_clip",  # a function of per-example gradients
        "differentially_private_aggregate",  # per-example gradients: a batch axis the contract's lack
        "has_updated",  # reads an accumulate_gradients state
        "skip_not_finite",  # accumulate_gradients' skip hooks
        "skip_large_updates",
        "value_and_grad_from_state",  # a value-and-gradient function reading a line search's state
        "scale_loss",  # reads a loss_scaled state
        "per_example_layer_norm_clip",  # a function of per-example gradients
        "unitwise_norm",  # array functions (adaptive_grad_clip's units)
        "unitwise_clip",
        "measure_with_ema",  # a measure for monitor: its update returns a measurement, not updates
        "microbatch",  # function transformations
        "micro_vmap",
        "micro_grad",
        "reshape_batch_axis",  # a function of a batch
        "incremental_update",  # functions of two parameter trees (target networks)
        "periodic_update",
        "from_returnn_config",  # a config reader, like from_config: it builds transforms from a config
        "hutchinson_diag_hessian",  # of an objective, params and a key: the Hessian-diagonal estimate
    }
    public = [
        n
        for n in gradtx.__all__
        if n not in not_factories
        and callable(getattr(gradtx, n))
        and not isinstance(getattr(gradtx, n), type)
        and n[0].islower()
    ]
    registered = {e.name for e in registry.entries()} | {a for e in registry.entries() for a in e.aliases}
    assert sorted(set(public) - registered) == []


def test_register_refuses_a_taken_name():
    with pytest.raises(
        ValueError, match=r"the name 'MomentumOptimizer' of 'other' is already taken by 'momentum'"
    ):
        registry.register(registry.Entry("other", gradtx.sgd, "optimizer", aliases=("MomentumOptimizer",)))
    assert "other" not in registry.names()


def test_register_refuses_to_replace_a_built_in_without_override():
    adam = registry.entry("adam")
    with pytest.raises(ValueError, match=r"`register`: 'adam' is already registered .* `override=True`"):
        registry.register(registry.Entry("adam", gradtx.sgd, "optimizer"))
    assert registry.entry("AdamOptimizer") is adam
    try:
        mine = registry.register(registry.Entry("adam", gradtx.sgd, "optimizer"), override=True)
        assert registry.entry("adam") is mine and registry.entry("AdamOptimizer") is mine
    finally:
        registry.register(adam, override=True)
    assert registry.entry("AdamOptimizer") is adam


def test_every_registered_factory_has_a_catalogue_row_and_the_rows_name_only_registered_ones():
    """The fixtures the suites run each entry with (tests/catalog) cover the registry, name for name."""
    assert [e.name for e in catalog.entries()] == list(registry.names())
    assert set(catalog.ROWS) == set(registry.names())


def test_the_registry_is_filled_where_the_factories_are_defined():
    """Each entry is registered by the module that defines its factory (the algorithm's, a combinator's or
    `parallel`'s), not by a catalogue of its own: the runtime registry is name, factory, aliases, kind and the
    reference implementation whose arguments `get` takes."""
    for e in registry.entries():
        assert inspect.unwrap(e.factory).__module__.startswith(
            ("gradtx._algorithms.", "gradtx.combinators.", "gradtx.parallel.")
        ), e
        assert dataclasses.fields(e) == dataclasses.fields(registry.Entry)
    assert [f.name for f in dataclasses.fields(registry.Entry)] == [
        "name",
        "factory",
        "kind",
        "aliases",
        "reference",
    ]


def test_entry_build_uses_the_example_and_overrides():
    e = catalog.entry("momentum")
    tx = e.build(momentum=0.0)
    u, _ = tx.update(jnp.ones(1), tx.init(jnp.zeros(1)))
    np.testing.assert_allclose(u, [-e.example["learning_rate"]])


def test_from_config_takes_returnn_style_dicts():
    _same(
        gradtx.from_config({"class": "adam", "learning_rate": 0.1, "epsilon": 1e-6, "beta1": 0.8}),
        gradtx.adam(0.1, b1=0.8, eps=1e-6),
    )
    _same(gradtx.from_config({"class": "GradientDescent", "learning_rate": 0.1}), gradtx.sgd(0.1))
    with pytest.raises(TypeError, match=r'`from_config`: `config` must be a dict with a string "class"'):
        gradtx.from_config({"learning_rate": 0.1})
    with pytest.raises(KeyError, match=r"unknown optimizer or transform 'adamm'"):
        gradtx.from_config({"class": "adamm"})


def test_get_names_a_needed_argument_that_is_missing():
    with pytest.raises(
        TypeError, match=r"`gradtx.get\('adamw'\)`: `adamw` needs `weight_decay` \(no default\)"
    ):
        gradtx.from_config({"class": "adamw", "epsilon": 1e-13, "learning_rate": 0.1})


def test_a_pytorch_class_name_takes_its_own_arguments_and_defaults():
    """`get(<class name>, **torch_kwargs)` builds what the PyTorch class builds (the class name spelled
    exactly); the lower-case gradtx name keeps gradtx's arguments."""
    e = registry.entry("Tiger")
    assert e.name == "tiger" and e.reference is not None and e.reference.class_name == "Tiger"
    assert registry.translate_kwargs("Tiger", {}) == {"learning_rate": 1e-3}  # the reference's default lr
    assert registry.translate_kwargs("Tiger", {"lr": 0.1, "beta": 0.9, "foreach": True}) == {
        "learning_rate": 0.1,
        "beta": 0.9,
    }
    assert registry.translate_kwargs("tiger", {"learning_rate": 0.1}) == {"learning_rate": 0.1}
    with pytest.raises(
        TypeError, match=r"`gradtx.get\('Tiger'\)` \(pytorch_optimizer.Tiger\): unknown argument `bta`"
    ):
        registry.translate_kwargs("Tiger", {"bta": 0.9})
    with pytest.raises(ValueError, match=r"reproduces `Tiger` with `maximize=False` only, got True"):
        registry.translate_kwargs("Tiger", {"maximize": True})
    with pytest.raises(TypeError, match="unknown argument `lr`"):
        registry.translate_kwargs("tiger", {"lr": 0.1})


def test_a_reference_splits_a_tuple_argument():
    entry = registry.Entry(
        "tmp_tuple",
        gradtx.lion,
        "optimizer",
        reference=registry.Reference("somelib.TmpLion", {"lr": "learning_rate", "betas": ("b1", "b2")}),
    )
    registry.register(entry)
    try:
        assert registry.translate_kwargs("TmpLion", {"lr": 0.1, "betas": (0.8, 0.9)}) == {
            "learning_rate": 0.1,
            "b1": 0.8,
            "b2": 0.9,
        }
        with pytest.raises(ValueError, match=r"`betas` must be a tuple of 2 values, got 0.9"):
            registry.translate_kwargs("TmpLion", {"betas": 0.9})
    finally:
        registry.unregister("tmp_tuple")
    assert "tmplion" not in [n.lower() for n in registry.names()]
