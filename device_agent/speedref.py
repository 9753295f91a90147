"""How fast the CPU was just before and just after a run was timed: a fixed reference kernel.

The load counters (``cpuload``) see other processes of this machine; they do not see what
slows a core without running on it: a neighbour virtual machine sharing its caches, memory
bandwidth or hyperthread sibling, a frequency step, steal the guest is not told of. A fixed
piece of work timed on each side of the timed loop does: where it took longer after the loop
than before, the CPU changed speed while the model was timed, and where a device's runs
differ from each other, their readings say whether the device did.

The kernel is NumPy (which every runtime brings) multiplying and adding two float32 vectors of
:data:`SIZE` elements, :data:`REPS` times per sample, in one thread; a reading is the median of
:data:`SAMPLES` samples (about 3 ms on a laptop core, outside every timed region). Its vectors
start on a cache line (:data:`ALIGN`) at every reading: where the allocator placed them was
the kernel's own noise, not the CPU's (measured here: 0.36 ms with the output on a 64-byte
boundary, 0.53-0.61 ms 16 bytes off it, so unaligned readings told a third of the runs apart).
"""

from __future__ import annotations

import statistics
import time

#: Elements per vector (64 KiB of float32: three of them stay in a core's L2 cache).
SIZE = 16384
REPS = 100
SAMPLES = 7
#: Every vector starts on a boundary of this many bytes (a cache line; AVX-512's width).
ALIGN = 64
#: The kernel's name, stored with each reading: readings of another kernel do not compare.
KERNEL = f"numpy-muladd-f32x{SIZE}x{REPS}-a{ALIGN}"


def reading() -> float | None:
    """The reference kernel's median sample, in ms; None where NumPy cannot run it."""
    try:
        import numpy as np

        a, b, c = (_aligned(np) for _ in range(3))
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


def _aligned(np):
    """A float32 vector of :data:`SIZE` elements whose first byte is on an :data:`ALIGN`
    boundary (NumPy aligns to 16 bytes only)."""
    raw = np.empty(SIZE * 4 + ALIGN, dtype=np.uint8)
    start = -raw.ctypes.data % ALIGN
    return raw[start:start + SIZE * 4].view(np.float32)


def around(before: float | None, after: float | None) -> dict | None:
    """The ``speed`` block of a result: the kernel and its readings before and after the
    timed loop (None where either reading failed)."""
    if before is None or after is None:
        return None
    return {"kernel": KERNEL, "before_ms": before, "after_ms": after}
