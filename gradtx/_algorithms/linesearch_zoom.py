"""The zoom line search of L-BFGS (strong Wolfe conditions; optax's numbers)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx import tree
from gradtx._algorithms.linesearch import check_number, cond_print, objective, strong, value_dtype
from gradtx._core import checks as _checks
from gradtx._core import hyper as _hyper
from gradtx._core import placement as _placement
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry


class ZoomLinesearchInfo(NamedTuple):
    """What the last zoom search did (optax's fields)."""

    num_linesearch_steps: jax.Array  # int: evaluations of the objective
    decrease_error: jax.Array  # how far the accepted step misses sufficient decrease (0: it does not)
    curvature_error: jax.Array  # how far it misses the curvature condition (0: it does not)


class ScaleByZoomLinesearchState(NamedTuple):
    """State of `scale_by_zoom_linesearch` (optax's layout)."""

    learning_rate: jax.Array  # the step size found last
    value: jax.Array  # the objective at the accepted step (read by `value_and_grad_from_state`)
    grad: Any  # its gradient
    info: ZoomLinesearchInfo


class _Point(NamedTuple):
    """A step size with the objective's value and slope there."""

    stepsize: jax.Array
    value: jax.Array
    slope: jax.Array


class _Zoom(NamedTuple):
    """The search's loop state."""

    steps: jax.Array  # evaluations so far
    guess: jax.Array  # the first step size tried
    at: _Point  # the last point evaluated
    grad: Any  # the gradient there
    decrease_error: jax.Array
    curvature_error: jax.Array
    interval_found: jax.Array
    done: jax.Array
    failed: jax.Array
    low: _Point  # the end of the interval with the lower value (not the smaller step size)
    high: _Point
    cubic_ref: jax.Array  # a third point for the cubic interpolation, and its value
    value_cubic_ref: jax.Array
    safe: _Point  # the best point with sufficient decrease so far (step size 0: none)
    safe_grad: Any


def _cubicmin(a, fa, fpa, b, fb, c, fc):
    """The critical point of the cubic through (a, fa), (b, fb), (c, fc) with slope fpa at a (NaN if none)."""
    db, dc = b - a, c - a
    denom = (db * dc) ** 2 * (db - dc)
    d1 = jnp.array([[dc**2, -(db**2)], [-(dc**3), db**3]])
    rhs = jnp.array([fb - fa - fpa * db, fc - fa - fpa * dc])
    cubic, square = jnp.dot(d1, rhs, precision=jax.lax.Precision.HIGHEST) / denom
    return a + (-square + jnp.sqrt(square * square - 3.0 * cubic * fpa)) / (3.0 * cubic)


def _quadmin(a, fa, fpa, b, fb):
    """The critical point of the quadratic through (a, fa), (b, fb) with slope fpa at a."""
    db = b - a
    return a - fpa / (2.0 * ((fb - fa - fpa * db) / db**2))


@_registry.transform()
def scale_by_zoom_linesearch(
    max_linesearch_steps: int,
    max_learning_rate: Any = None,
    tol: Any = 0.0,
    increase_factor: Any = 2.0,
    slope_rtol: Any = 1e-4,
    curv_rtol: Any = 0.9,
    approx_dec_rtol: Any = 1e-6,
    stepsize_precision: Any = 1e-5,
    *,
    initial_guess_strategy: str = "keep",
    verbose: bool = False,
) -> _protocol.GradientTransformation:
    r"""Scale the direction by a step size meeting the strong Wolfe conditions (zoom line search).

    .. math::
        f(w + \eta u) \le f(w) + c_1 \eta \langle u, \nabla f(w)\rangle + \epsilon, \qquad
        |\langle \nabla f(w + \eta u), u\rangle| \le c_2 |\langle \nabla f(w), u\rangle| + \epsilon

    with :math:`c_1` = `slope_rtol`, :math:`c_2` = `curv_rtol`, :math:`\epsilon` = `tol`; near
    a minimum (the value within `approx_dec_rtol` of the start) Hager & Zhang's approximate
    decrease :math:`\langle\nabla f(w+\eta u), u\rangle \le (2c_1 - 1)\langle\nabla f(w), u\rangle`
    may replace the first. The search multiplies the step size by `increase_factor` from its
    first guess (1, or the last step size with `initial_guess_strategy="keep"`) until an
    interval holds an acceptable one, then zooms into it by cubic, quadratic or bisection
    steps; it stops after `max_linesearch_steps` evaluations or when the interval is shorter
    than `stepsize_precision` (taking the best step with sufficient decrease found). The
    state keeps the value and gradient at the accepted step (`value_and_grad_from_state`).
    `update(updates, state, params, value_fn=f, value=f(params), grad=grad_f(params),
    **kwargs)`: `value` and `grad` are computed from `f` when not given; the extra arguments
    that `f`'s signature names are passed on to it. The numbers of
    `optax.scale_by_zoom_linesearch`.

    Args:
      max_linesearch_steps: the most evaluations of the objective per step, >= 1.
      max_learning_rate: the largest step size (> 0), or None for none.
      tol: the tolerance of both conditions, >= 0.
      increase_factor: the factor the step size grows by while searching an interval, > 1.
      slope_rtol: :math:`c_1`, in [0, 1).
      curv_rtol: :math:`c_2`, > `slope_rtol` (inf: no curvature condition).
      approx_dec_rtol: the relative closeness of values that allows the approximate decrease
        condition, >= 0, or None for the sufficient decrease condition alone.
      stepsize_precision: the interval length below which the search stops, >= 0.
      initial_guess_strategy: `"one"` (start each search at 1) or `"keep"` (at the last step size).
      verbose: print a diagnostic when the search fails.

    Returns:
      A transform (leaf-wise on packed params) with state `ScaleByZoomLinesearchState`.

    Complex params are supported (the step turns with their phase); for them the first slope
    differs from optax 0.2.8's, which conjugates the direction instead of the gradient
    (`gradtx.optax_compat.scale_by_zoom_linesearch` keeps optax's).

    Raises:
      ValueError: for an argument outside its range or an unknown strategy.
      TypeError: for a schedule, a non-int `max_linesearch_steps` or a non-bool `verbose`.
      MissingExtraArgError: (when traced) if `update` gets no `value_fn`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> f = lambda w: jnp.sum(w**2)
        >>> tx = gradtx.chain(gradtx.scale(-1.0), gradtx.scale_by_zoom_linesearch(15))
        >>> w = jnp.array([1.0, 2.0])
        >>> u, state = tx.update(2 * w, tx.init(w), w, value_fn=f)
        >>> w + u, state[1].learning_rate  # the exact minimizer along -grad
        (Array([0., 0.], dtype=float32), Array(0.5, dtype=float32))

    References:
      Nocedal & Wright, *Numerical Optimization*, 1999 (Algorithms 3.5, 3.6); Hager & Zhang,
      *Algorithm 851: CG_DESCENT*, ACM TOMS 2006.
    """
    return zoom_linesearch(
        max_linesearch_steps, max_learning_rate, tol, increase_factor, slope_rtol, curv_rtol, approx_dec_rtol,
        stepsize_precision, initial_guess_strategy, verbose, optax_start_slope=False,
    )  # fmt: skip


def zoom_linesearch(
    max_linesearch_steps: int,
    max_learning_rate: Any,
    tol: Any,
    increase_factor: Any,
    slope_rtol: Any,
    curv_rtol: Any,
    approx_dec_rtol: Any,
    stepsize_precision: Any,
    initial_guess_strategy: str,
    verbose: bool,
    *,
    optax_start_slope: bool,
) -> _protocol.GradientTransformation:
    r"""`scale_by_zoom_linesearch`; with `optax_start_slope`, the slope at step size 0 of complex params is
    optax 0.2.8's :math:`\mathrm{Re}\langle u, g\rangle` (`u` conjugated), where every later slope (and
    `scale_by_zoom_linesearch`'s first) is :math:`\mathrm{Re}\langle \bar g, u\rangle`, the derivative of
    :math:`\eta \mapsto f(w + \eta u)` for JAX's gradients; the same number for real params."""
    fn = "scale_by_zoom_linesearch"
    _checks.check_int(fn, "max_linesearch_steps", max_linesearch_steps, minimum=1)
    if max_learning_rate is not None:
        check_number(fn, "max_learning_rate", max_learning_rate)
        _checks.check_positive(fn, "max_learning_rate", max_learning_rate)
    for name, value in (("tol", tol), ("stepsize_precision", stepsize_precision)):
        check_number(fn, name, value)
        _checks.check_nonnegative(fn, name, value)
    check_number(fn, "increase_factor", increase_factor)
    _checks.check_in_range(fn, "increase_factor", increase_factor, 1.0, jnp.inf, low_open=True)
    check_number(fn, "slope_rtol", slope_rtol)
    _checks.check_in_range(fn, "slope_rtol", slope_rtol, 0.0, 1.0, high_open=True)
    if not (isinstance(curv_rtol, float) and curv_rtol == jnp.inf):
        check_number(fn, "curv_rtol", curv_rtol)
        _checks.check_in_range(fn, "curv_rtol", curv_rtol, 0.0, jnp.inf, low_open=True)
        if isinstance(curv_rtol, float) and isinstance(slope_rtol, float) and curv_rtol <= slope_rtol:
            raise ValueError(
                f"`{_checks.api_name(fn)}`: `curv_rtol` must be > `slope_rtol` ({slope_rtol}) for a step "
                f"size meeting both conditions to exist, got {curv_rtol}."
            )
    if approx_dec_rtol is not None:
        check_number(fn, "approx_dec_rtol", approx_dec_rtol)
        _checks.check_nonnegative(fn, "approx_dec_rtol", approx_dec_rtol)
    _checks.check_one_of(fn, "initial_guess_strategy", initial_guess_strategy, ("one", "keep"))
    _checks.check_bool(fn, "verbose", verbose)
    fn = _checks.api_name(fn)

    def errors(at: _Point, start: _Point):
        """The decrease and curvature errors at `at` (0 where met, inf for NaN)."""
        decrease = at.value - start.value - slope_rtol * at.stepsize * start.slope
        if approx_dec_rtol is not None:  # Hager & Zhang's approximate decrease, near a minimum
            approx = at.slope - (2 * slope_rtol - 1.0) * start.slope
            approx = jnp.maximum(approx, at.value - start.value - approx_dec_rtol * jnp.abs(start.value))
            decrease = jnp.minimum(approx, decrease)
        curvature = jnp.abs(at.slope) - curv_rtol * jnp.abs(start.slope)
        return tuple(jnp.where(jnp.isnan(e), jnp.inf, jnp.maximum(e, 0.0)) for e in (decrease, curvature))

    def search_interval(s: _Zoom, start, evaluate) -> _Zoom:
        """Algorithm 3.5: grow the step size until an interval holds an acceptable one."""
        stepsize = jnp.where(s.steps == 0, s.guess, increase_factor * s.at.stepsize)
        reached_max = jnp.asarray(False)
        if max_learning_rate is not None:
            reached_max = stepsize >= max_learning_rate
            stepsize = jnp.minimum(stepsize, max_learning_rate)
        new, grad = evaluate(stepsize)
        decrease_error, curvature_error = errors(new, start)
        error = jnp.maximum(decrease_error, curvature_error)
        safe, safe_grad = tree.where(decrease_error <= tol, [new, grad], [s.safe, s.safe_grad])
        high_is_new = (decrease_error > 0.0) | ((new.value >= s.at.value) & (s.steps > 0))
        low_is_new = (new.slope >= 0.0) & ~high_is_new
        low, high = tree.where(low_is_new, [new, s.at], [s.at, new])
        interval_found = high_is_new | low_is_new | (error <= tol)
        done = (error <= tol) | (reached_max & ~interval_found)
        if verbose:
            cond_print(
                reached_max & ~interval_found,
                f"INFO: {fn}: no interval meeting the curvature condition below the largest step size "
                "{stepsize}; taking it with sufficient decrease only.",
                stepsize=stepsize,
            )
        failed = (s.steps + 1 >= max_linesearch_steps) & ~done
        return s._replace(
            steps=_hyper.increment(s.steps), at=new, grad=grad, decrease_error=decrease_error,
            curvature_error=curvature_error, interval_found=jnp.asarray(interval_found),
            done=jnp.asarray(done), failed=jnp.asarray(failed), low=low, high=high, cubic_ref=low.stepsize,
            value_cubic_ref=low.value, safe=safe, safe_grad=safe_grad,
        )  # fmt: skip

    def zoom(s: _Zoom, start, evaluate) -> _Zoom:
        """Algorithm 3.6: shrink the interval by cubic, quadratic or bisection steps."""
        low, high = s.low, s.high
        delta = jnp.abs(high.stepsize - low.stepsize)
        left, right = jnp.minimum(high.stepsize, low.stepsize), jnp.maximum(high.stepsize, low.stepsize)
        cubic = _cubicmin(*low, high.stepsize, high.value, s.cubic_ref, s.value_cubic_ref)
        use_cubic = (cubic > left + 0.2 * delta) & (cubic < right - 0.2 * delta)
        quad = _quadmin(*low, high.stepsize, high.value)
        use_quad = ~use_cubic & (quad > left + 0.1 * delta) & (quad < right - 0.1 * delta)
        middle = jnp.where(use_cubic, cubic, s.cubic_ref)
        middle = jnp.where(use_quad, quad, middle)
        middle = jnp.where(~use_cubic & ~use_quad, (low.stepsize + high.stepsize) / 2.0, middle)
        new, grad = evaluate(middle)
        decrease_error, curvature_error = errors(new, start)
        error = jnp.maximum(decrease_error, curvature_error)
        better = (decrease_error <= tol) & (new.value < s.safe.value)
        safe, safe_grad = tree.where(better, [new, grad], [s.safe, s.safe_grad])
        done = error <= tol
        high_is_middle = (decrease_error > 0.0) | (new.value >= low.value)
        high_is_low = (new.slope * (high.stepsize - low.stepsize) >= 0.0) & ~high_is_middle
        new_high = tree.where(high_is_middle, new, high)
        new_high = tree.where(high_is_low, low, new_high)
        new_low = tree.where(~high_is_middle, new, low)
        cubic_ref, value_cubic_ref = tree.where(
            high_is_middle | high_is_low, [high.stepsize, high.value], [low.stepsize, low.value]
        )
        # stop on a too short interval only once a step with sufficient decrease is known
        stop = (s.steps + 1 >= max_linesearch_steps) | ((delta <= stepsize_precision) & (safe.stepsize > 0.0))
        return s._replace(
            steps=_hyper.increment(s.steps), at=new, grad=grad, decrease_error=decrease_error,
            curvature_error=curvature_error, done=done, failed=stop & ~done, low=new_low, high=new_high,
            cubic_ref=cubic_ref, value_cubic_ref=value_cubic_ref, safe=safe, safe_grad=safe_grad,
        )  # fmt: skip

    def take_safe_step(s: _Zoom) -> _Zoom:
        """On failure: the best step with sufficient decrease, else the last one tried."""
        use_safe = (s.safe.stepsize > 0.0) | jnp.isinf(s.decrease_error)
        at, grad = tree.where(use_safe, [s.safe, s.safe_grad], [s.at, s.grad])
        if verbose:
            jax.debug.print(
                f"INFO: {fn}: the line search failed (last step size {{stepsize}}, decrease error "
                "{decrease}, curvature error {curvature}); taking step size {taken}.",
                stepsize=s.at.stepsize, decrease=s.decrease_error, curvature=s.curvature_error,
                taken=at.stepsize, ordered=True,
            )  # fmt: skip
        return tree.cast_like(
            s._replace(at=s.at._replace(stepsize=at.stepsize, value=at.value), grad=grad), s
        )

    def init_fn(params):
        dtype = value_dtype(params)
        return ScaleByZoomLinesearchState(
            learning_rate=jnp.asarray(1.0, dtype),
            value=jnp.asarray(jnp.inf, dtype),
            grad=_placement.zeros_like(params),
            info=ZoomLinesearchInfo(strong(0), strong(jnp.inf), strong(jnp.inf)),
        )

    def update_fn(updates, state, params=None, *, value=None, grad=None, value_fn=None, **extra_args):
        updates, value, grad, f = objective(fn, updates, state, params, value, grad, value_fn, extra_args)
        value_and_grad = jax.value_and_grad(f)

        def evaluate(stepsize):
            value, grad = value_and_grad(tree.add_scale(params, stepsize, updates))
            return _Point(stepsize, value, tree.real(tree.vdot(tree.conj(grad), updates))), grad

        slope = tree.real(
            tree.vdot(updates, grad) if optax_start_slope else tree.vdot(tree.conj(grad), updates)
        )
        start = _Point(jnp.asarray(0.0), value, slope)
        guess = jnp.asarray(1.0) if initial_guess_strategy == "one" else state.learning_rate
        dtype = value_dtype(params)
        inf, no, zero = jnp.asarray(jnp.inf), jnp.asarray(False), jnp.asarray(0.0)
        # the last point's gradient starts from the state's (always overwritten; a donated buffer is reused)
        s = _Zoom(
            jnp.asarray(0), guess, _Point(jnp.asarray(0.0, dtype), jnp.array(value, dtype), slope),
            state.grad, inf, inf, no, no, no, start, start, zero, value, start, grad,
        )  # fmt: skip

        def step(s):
            new = jax.lax.cond(
                s.interval_found,
                lambda s: tree.cast_like(zoom(s, start, evaluate), s),
                lambda s: tree.cast_like(search_interval(s, start, evaluate), s),
                s,
            )
            return tree.cast_like(jax.lax.cond(new.failed, take_safe_step, lambda x: x, new), s)

        s = jax.lax.while_loop(lambda s: ~(s.done | s.failed), step, s)
        info = ZoomLinesearchInfo(s.steps, s.decrease_error, s.curvature_error)
        new_state = ScaleByZoomLinesearchState(s.at.stepsize, s.at.value, s.grad, info)
        new_updates = tree.cast_like(tree.scale(s.at.stepsize, updates), updates)
        return new_updates, tree.cast_like(new_state, state)

    return _protocol.GradientTransformation(init_fn, update_fn)


__all__ = ["ScaleByZoomLinesearchState", "ZoomLinesearchInfo", "scale_by_zoom_linesearch"]
