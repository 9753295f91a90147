"""Sliding windows for aiot's NumPy reference executors (Caffe2 NetDef, daBNN).

Convolution and pooling both reduce over the kernel positions of a padded map. Taking one
strided slice of the map per kernel position — rather than a sliding-window view — keeps
every reduction a contiguous elementwise pass, several times faster on inception-sized nets.
"""

from __future__ import annotations


def window_taps(padded, kernel: tuple[int, int], stride: tuple[int, int], out: tuple[int, int],
                dilation: tuple[int, int] = (1, 1), axes: tuple[int, int] = (2, 3)) -> list:
    """One view of the already padded array per kernel position, row-major.

    Args:
        padded: the input with its padding applied (NCHW: ``axes=(2, 3)``; NHWC: ``(1, 2)``).
        kernel, stride, out, dilation: per spatial axis; ``out`` is the output size.

    Returns:
        ``kernel[0] * kernel[1]`` views shaped like the output map.
    """
    views = []
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            index = [slice(None)] * padded.ndim
            for axis, k, s, o, d in ((axes[0], i, stride[0], out[0], dilation[0]),
                                     (axes[1], j, stride[1], out[1], dilation[1])):
                index[axis] = slice(k * d, k * d + (o - 1) * s + 1, s)
            views.append(padded[tuple(index)])
    return views
