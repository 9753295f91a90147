"""What one measurement is asked to do: the settings ``aiot run``, ``aiot sweep`` and ``aiot
push`` hand to the engine, as one frozen :class:`SweepSpec` (as MLPerf LoadGen's
``TestSettings``). The CLI parses the options into it; :mod:`aiot.host.engine.preflight` checks
it against the devices, files and store before anything converts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from aiot.host.engine.campaign import CampaignPolicy
from aiot.host.engine.cooldown import CooldownPolicy
from aiot.host.engine.input_shapes import ShapeArg
from aiot.host.engine.runs import MeasureParams, RunRequest, expand_targets
from aiot.host.engine.validity import ValidityPolicy
from aiot.models.model_ref import ModelRef

#: A model to measure and the formats to measure it in (an artifact file: its own one).
Target = tuple[ModelRef, tuple[str, ...]]

@dataclass(frozen=True)
class SweepSpec:
    """Every combination of ``devices`` × ``targets`` × delegates × clusters × ``threads``
    (× ``vias``), and how to measure and schedule it.

    Attributes:
        devices: device names, resolved (``local``, inventory names).
        targets: ``(ModelRef, formats)`` pairs (:func:`aiot.host.engine.preflight.resolve_targets`);
            None: what was last pushed to each device (``aiot push``), as pushed.
        threads: thread counts.
        params: the timing knobs of every run.
        weights: a state-dict file (None: each model's default,
            :func:`aiot.host.engine.weights.choose_weights`).
        dataset, limit: also measure top-1 accuracy on this data set's test split (at most
            ``limit`` images).
        native, binary, delegates: time with a native benchmark tool (its file; its delegates)
            instead of the device agent.
        binarize: the BiBench algorithm the models are binarized with.
        clusters: CPU clusters to pin the runs to (None: no pinning).
        options: converter options (``--opt``), sorted ``(key, value)`` pairs.
        input_shapes: the ``--input-shape`` arguments (:func:`~aiot.host.engine.input_shapes.parse_shape_args`).
        inputs_file: a ``.npz`` of real input values.
        vias: how the agent starts on an Android device (``shell``, ``app``).
        seed, shuffle, fresh: the run order's seed, whether to shuffle it, and whether to measure
            everything again rather than resume.
        retries: attempts per run on device or link failures.
        cooldown_max_s: the longest wait for a device to cool down before each run (0: none).
        lab: a lab's ``HOST:PORT``: each device is measured on the lab node that owns it.

    The defaults are ``aiot sweep``'s (its options take them from here); ``aiot run`` is one
    run, unshuffled and measured anew.
    """

    devices: tuple[str, ...]
    targets: tuple[Target, ...] | None = None
    threads: tuple[int, ...] = (1, 2, 4, 8)
    params: MeasureParams = field(default_factory=MeasureParams)
    weights: Path | None = None
    dataset: str | None = None
    limit: int | None = None
    native: str | None = None
    binary: Path | None = None
    delegates: tuple[str, ...] | None = None
    binarize: str | None = None
    clusters: tuple[str, ...] | None = None
    options: tuple[tuple[str, str], ...] = ()
    input_shapes: tuple[ShapeArg, ...] = ()
    inputs_file: Path | None = None
    scoped_inputs: tuple[tuple[str, Path], ...] = ()  # --inputs MODEL:FILE.npz
    input_values: tuple[tuple[str, int | float], ...] = ()  # --input-value NAME=NUMBER
    vias: tuple[str, ...] = ("shell",)
    seed: int = 0
    shuffle: bool = True
    fresh: bool = False
    retries: int = 3
    cooldown_max_s: float | None = 120.0
    lab: str | None = None
    validity: str | None = None  # --validity: limits over AIOT_VALIDITY's (same grammar)

    @property
    def both_vias(self) -> bool:
        """The sweep compares ``--via app`` with ``--via shell``."""
        return {"app", "shell"} <= set(self.vias)

    def requests(self, dataset: str | None, inputs: Path | None,
                 inputs_sha256: str | None) -> list[RunRequest]:
        """The runs of :attr:`targets` (``dataset``: its canonical name; ``inputs``: the checked
        ``.npz`` and its hash), before shapes, vias and weights are bound."""
        return expand_targets(list(self.devices), list(self.targets or ()), list(self.threads),
                              delegates=list(self.delegates) if self.delegates else None,
                              clusters=list(self.clusters) if self.clusters else None,
                              weights=self.weights, dataset=dataset, dataset_limit=self.limit,
                              params=self.params, native=self.native, binary=self.binary,
                              binarize=self.binarize, inputs=inputs, inputs_sha256=inputs_sha256,
                              options=self.options or None,
                              input_values=self.input_values or None)

    def campaign_policy(self, lab=None, probes: dict | None = None) -> CampaignPolicy:
        """How the campaign treats the devices (``lab``: the open lab session, if any;
        ``probes``: each device's probe as preflight read it). Where a
        sweep compares the two vias, the shell's runs also start one agent process per run, as
        the app's must (``am`` cannot feed a session's stdin)."""
        return CampaignPolicy(retries=self.retries, cooldown=cooldown_policy(self.cooldown_max_s),
                              lab=lab, persistent_agent=False if self.both_vias else None,
                              validity=ValidityPolicy.from_env(option=self.validity), probes=probes)


def cooldown_policy(max_s: float | None) -> CooldownPolicy | None:
    """The cool-down gate for ``--cooldown-max-s`` (0: no gating, telemetry still recorded)."""
    return CooldownPolicy(max_wait_s=max_s) if max_s else None
