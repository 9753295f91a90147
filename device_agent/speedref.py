"""How fast the CPU was just before and just after a run was timed: a fixed reference kernel.

The load counters (``cpuload``) see other processes of this machine; they do not see what
slows a core without running on it: a neighbour virtual machine sharing its caches, memory
bandwidth or hyperthread sibling, a frequency step, steal the guest is not told of. A fixed
piece of work timed on each side of the timed loop does: where it took longer after the loop
than before, the CPU changed speed while the model was timed, and where a device's runs
differ from each other, their readings say whether the device did.

The kernel is NumPy (which every runtime brings) multiplying and adding two float32 vectors of
:data:`SIZE` elements, :data:`REPS` times per sample, in one thread; a reading is the median of
:data:`SAMPLES` samples (about 3 ms on a laptop core, outside every timed region).

Where its vectors lie is part of its time, so they are placed once per process and every
reading reuses them: a reading before the timed loop and one after it then differ only by the
CPU. Placed anew at each reading, the same kernel took 0.36 ms or 0.50 ms on one quiet core by
where the allocator put them: first their alignment (a third of a collection's runs read
"speed changed" for it), then their offsets within a page (vectors at the same offset in
their pages make loads wait on earlier stores to it: 4K aliasing). So the vectors start on
page boundaries plus :data:`STAGGER` apart, no two at one offset in a page.
"""

from __future__ import annotations

import statistics
import time

#: Elements per vector (64 KiB of float32: three of them stay in a core's L2 cache).
SIZE = 16384
REPS = 100
SAMPLES = 7
#: Each vector starts this many bytes further into its page than the one before (0, 1 KiB,
#: 2 KiB): loads of one never wait on stores to another at the same page offset.
STAGGER = 1024
PAGE = 4096
#: The kernel's name, stored with each reading: readings of another kernel do not compare.
KERNEL = f"numpy-muladd-f32x{SIZE}x{REPS}-s{STAGGER}"

_vectors: list | None = None  # this process's three vectors (see the module docstring)


def reading() -> float | None:
    """The reference kernel's median sample, in ms; None where NumPy cannot run it."""
    try:
        import numpy as np

        a, b, c = _placed(np)
        a[:] = np.linspace(0.0, 1.0, SIZE, dtype=np.float32)
        b[:] = a[::-1]
        np.multiply(a, b, out=c)  # the first call pays for NumPy's own setup
        samples = []
        for _ in range(SAMPLES):
            start = time.perf_counter_ns()
            for _ in range(REPS):
                np.multiply(a, b, out=c)
                np.add(c, a, out=c)
            samples.append((time.perf_counter_ns() - start) / 1e6)
    except Exception:  # noqa: BLE001 - a device without a working NumPy: no reading, no failure
        return None
    return round(statistics.median(samples), 4)


def _placed(np) -> list:
    """This process's three float32 vectors of :data:`SIZE` elements, placed on their first
    call: in one buffer, each on a page boundary plus its :data:`STAGGER`."""
    global _vectors
    if _vectors is None:
        step = SIZE * 4 + PAGE  # a vector and a page: the next one starts on a page again
        raw = np.empty(3 * step + PAGE, dtype=np.uint8)
        first = -raw.ctypes.data % PAGE
        _vectors = [raw[first + i * (step + STAGGER):first + i * (step + STAGGER) + SIZE * 4]
                    .view(np.float32) for i in range(3)]
    return _vectors


def around(before: float | None, after: float | None) -> dict | None:
    """The ``speed`` block of a result: the kernel and its readings before and after the
    timed loop (None where either reading failed)."""
    if before is None or after is None:
        return None
    return {"kernel": KERNEL, "before_ms": before, "after_ms": after}
