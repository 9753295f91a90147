"""``--input-value NAME=NUMBER``, and saying which inputs got made-up values.

Without ``--inputs`` the agent makes inputs up by element type (floats standard normal,
integers uniform in a small range: :func:`aiot.device_agent.signature.generate`). A control
input (a sample rate that must be 8000 or 16000, a mode flag) then steers the graph down a
path real data never takes: it fails deep in the runtime, or times another model. The user
gives such an input's value here; where none was given, the record (its result's ``inputs``
block) says which integer inputs were made up and from what range, and a run says so.
"""

from __future__ import annotations

from aiot.core.errors import UsageError

SYNTAX = "NAME=NUMBER"


def parse_value_args(values: list[str] | None) -> tuple[tuple[str, int | float], ...]:
    """``--input-value`` values as sorted ``(name, number)`` pairs (hashable, for a request).

    Raises:
        UsageError: a value not ``NAME=NUMBER``, or one name given two different numbers.
    """
    found: dict[str, int | float] = {}
    for text in values or ():
        name, sep, number = text.rpartition("=")
        try:
            value = float(number) if any(c in number.lower() for c in ".en") else int(number)
        except ValueError:
            value = None
        if not sep or not name.strip() or value is None or value != value:  # NaN: no value
            raise UsageError(f"--input-value {text!r} is not {SYNTAX}",
                             "e.g. --input-value sample_rate=16000")
        name = name.strip()
        if found.get(name, value) != value:
            raise UsageError(f"--input-value gives '{name}' twice ({found[name]} and {value})",
                             "give each input one value")
        found[name] = value
    return tuple(sorted(found.items()))


def made_up_ints(result: dict | None) -> list[dict]:
    """The integer inputs of a run's ``result`` that the agent made up in its own small range
    (each with ``range``), not in one the model gave (an embedding's size: ``range_from``)."""
    return [i for i in (result or {}).get("inputs") or ()
            if i.get("range") and not i.get("range_from")]


def model_ranged_ints(result: dict | None) -> list[dict]:
    """The integer inputs drawn in the range the model takes (``range_from`` says why)."""
    return [i for i in (result or {}).get("inputs") or ()
            if i.get("range") and i.get("range_from")]


def values_detail(result: dict | None) -> str | None:
    """How a record's inputs were filled where it matters: given values, integers drawn in
    the model's own range (and from what), made-up integers."""
    inputs = (result or {}).get("inputs") or ()
    given = [f"{i['name']}={i['value']}" for i in inputs if i.get("source") == "given"]
    drawn = [f"{i['name']} {i['dtype']} in [{i['range'][0]}, {i['range'][1]}) "
             f"({i['range_from']})" for i in model_ranged_ints(result)]
    made = [f"{i['name']} {i['dtype']} uniform in [{i['range'][0]}, {i['range'][1]})"
            for i in made_up_ints(result)]
    parts = ([f"given: {', '.join(given)}"] if given else []) + (
        [f"drawn: {', '.join(drawn)}"] if drawn else []) + (
        [f"made-up values: {', '.join(made)}"] if made else [])
    return "; ".join(parts) or None


def made_up_note(model: str, result: dict | None) -> str | None:
    """One warning line where an integer scalar input got made-up values: it may select a
    branch (a sample rate, a mode), so the run may have timed a path real data never takes."""
    scalars = [i for i in made_up_ints(result) if len(i["shape"]) == 0 or i["shape"] == [1]]
    if not scalars:
        return None
    names = ", ".join(f"'{i['name']}' ({i['dtype']})" for i in scalars)
    low, high = scalars[0]["range"]
    example = scalars[0]["name"]
    return (f"{model}: integer scalar input {names} got made-up values in [{low}, {high}); "
            "a control input (a sample rate, a mode) may then take a path real data never "
            f"takes: give its value, e.g. --input-value {example}=16000, or --inputs FILE.npz")
