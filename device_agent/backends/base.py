"""What every backend's sessions share (:class:`SessionBase`), the shape of a run's placement
(:func:`placement_entry`) and a helper for ``installed_version``. The backend contract itself
is in ``contract.py``."""

from __future__ import annotations

from abc import ABC, abstractmethod

from ..signature import resolve


class SessionBase(ABC):
    """What every backend session shares (what ``open`` returns).

    A backend describes its model with :meth:`_declare`: ``inputs`` and ``outputs`` (the
    signature as the file declares it, -1 for a dynamic dim), ``shapes`` (the concrete shape
    each input is set to now, -1 where a dynamic dim is still open) and, for the first input,
    ``input_shape`` (open dims as 1, what older agents fed) and ``input_dtype``. It implements
    ``set_inputs(arrays)`` (one array per input, in ``inputs`` order, each in the input's own
    dtype), ``invoke()`` and ``outputs_all()`` (one array per output).

    ``set_input``/``output``/``run`` are the single-input path that accuracy, ``predict``
    and ``serve`` use: the first input and the first output. ``api`` names the runtime API
    that runs the model where a backend has several (a ``run`` result records it).
    """

    inputs: list[dict]
    outputs: list[dict]
    shapes: list[list[int]]
    input_shape: tuple = ()
    input_dtype = None
    api: str | None = None

    @abstractmethod
    def set_inputs(self, arrays) -> None:
        """Set every input: one array per input, in ``inputs`` order, each in its own dtype."""

    @abstractmethod
    def invoke(self) -> None:
        """Run the model once on the inputs set (the timed call)."""

    @abstractmethod
    def outputs_all(self) -> list:
        """One array per output after ``invoke``."""

    def _declare(self, inputs: list[dict], outputs: list[dict], input_shapes: dict | None):
        """Record the signature and apply ``input_shapes``; returns the resolved ``shapes``.

        Raises:
            SpecError: an override names no input or does not fit its shape.
        """
        import numpy as np

        self.inputs, self.outputs = inputs, outputs
        self._set_shapes(resolve(inputs, input_shapes))
        if inputs and inputs[0]["dtype"] != "string":
            self.input_dtype = np.dtype(inputs[0]["dtype"])
        return self.shapes

    def _set_shapes(self, shapes: list[list[int]]) -> None:
        self.shapes = [list(s) for s in shapes]
        self.input_shape = tuple(d if d >= 0 else 1 for d in shapes[0]) if shapes else ()

    def set_input(self, x) -> None:
        """Set the one input of a single-input model."""
        self.set_inputs([x])

    def output(self):
        """The first output after ``invoke``."""
        return self.outputs_all()[0]

    def run(self, x):
        """Set the input, invoke, return the first output."""
        self.set_input(x)
        self.invoke()
        return self.output()

    def placement(self) -> dict | None:
        """Where the model's operators run, from the runtime's own account
        (:func:`placement_entry`'s fields), or None where the backend reads none.

        Called once after the timed loop, never inside it: a backend that needs a second,
        instrumented load for it (ONNX Runtime's profiled session) pays for it there.
        """
        return None


def placement_entry(engine: str, source: str, *, total: int | None = None,
                    delegated: int | None = None, partitions: int | None = None,
                    outside: dict[str, int] | None = None, by_engine: dict[str, int] | None = None,
                    complete: bool | None = None, note: str | None = None) -> dict:
    """A ``result``'s ``placement``: which operators the engine the run asked for took.

    Args:
        engine: what was to take every operator ("xnnpack", "CPUExecutionProvider", ...).
        source: where the runtime said so ("execution plan", "session profile", "program").
        total: the operators (nodes) of the graph the runtime ran.
        delegated: how many of them the engine took.
        partitions: how many delegate partitions (nodes) replaced them.
        outside: the operators left outside the engine, by type: ``{"CUMSUM": 1}``.
        by_engine: nodes per executor where there are several (ONNX Runtime's providers).
        complete: whether the engine took every operator; derived from ``outside`` (or from
            ``total`` and ``delegated``) when not given; None: the runtime does not say.
        note: what a reader must know to read it (no XNNPACK in this build, ...).
    """
    outside, by_engine = _capped(outside), _capped(by_engine)
    if outside is not None:
        outside_nodes = sum(outside.values())
    elif total is not None and delegated is not None:
        outside_nodes = max(total - delegated, 0)
    else:
        outside_nodes = None
    if complete is None and outside_nodes is not None:
        complete = outside_nodes == 0
    entry = {"engine": engine, "source": source, "total_nodes": total, "delegated_nodes": delegated,
             "outside_nodes": outside_nodes, "partitions": partitions, "outside": outside,
             "by_engine": by_engine, "complete": complete, "note": note}
    return {key: value for key, value in entry.items() if value is not None}


#: The longest operator or executor name a placement keeps: a custom operator's name is the
#: file's text, and the host refuses a message whose map keys run past 100 characters.
NAME_CAP = 80


def _capped(counts: dict[str, int] | None) -> dict[str, int] | None:
    if counts is None:
        return None
    found: dict[str, int] = {}
    for name, count in counts.items():
        key = str(name)[:NAME_CAP]
        found[key] = found.get(key, 0) + count
    return found


def installed_from(distributions: tuple[str, ...]) -> str | None:
    """The installed version of the first of ``distributions`` (package names) that is
    installed, from package metadata; None if none is. A broken install still shows as
    installed here; the run that uses it fails with the runtime's own error."""
    # Stdlib, but it pulls the email package: only hello pays for it.
    from importlib.metadata import PackageNotFoundError, version

    for distribution in distributions:
        try:
            return version(distribution)
        except PackageNotFoundError:
            continue
    return None
