"""What every backend's sessions share (:class:`SessionBase`) and a helper for
``installed_version``. The backend contract itself is in ``contract.py``."""

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
