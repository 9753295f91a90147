"""JPEG decoders: the same bytes, decoded by the libraries a deployment might use.

Pillow (libjpeg-turbo, accurate integer IDCT, "fancy" chroma upsampling) is the reference.
The decoders that really differ (``../shared/notes/robustness.md`` §C) are FFmpeg's mjpeg
decoder plus swscale (PyAV), libjpeg-turbo with its fast IDCT and/or fast chroma upsampling
(simplejpeg's flags, what many mobile pipelines use), Thomas Richter's libjpeg
(pylibjpeg-libjpeg) and kornia-rs' Rust decoder. OpenCV, imageio, simplejpeg's defaults and
kornia-rs' libjpeg-turbo binding are expected to be bit-identical to Pillow; the suite checks
that on the actual JPEGs every run (wheel versions change the bundled libjpeg) and reports a
decoder that turns out identical as such, never as a zero finding.

Every decoder returns the JPEG's own colour space: ``(H, W)`` for a grayscale JPEG, RGB
``(H, W, 3)`` otherwise, uint8.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

#: The reference decoder (the toolkit's own pipeline decodes with Pillow).
REFERENCE = "pillow"


@dataclass(frozen=True)
class Decoder:
    """One way to decode a JPEG.

    Args:
        name: option name in tables and on the command line.
        package: the distribution that provides it (availability, version in the record).
        title: what it is, for tables and notes.
        decode: ``(jpeg bytes, gray) -> uint8 pixels``; ``gray`` says the JPEG is grayscale.
        same_library: expected bit-identical to Pillow (libjpeg-turbo, default flags).
    """

    name: str
    package: str
    title: str
    decode: Callable[[bytes, bool], np.ndarray]
    same_library: bool = False


def _pillow(data: bytes, gray: bool) -> np.ndarray:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        return np.asarray(image.convert("L" if gray else "RGB"))


def _opencv(data: bytes, gray: bool) -> np.ndarray:
    import cv2

    # IMREAD_UNCHANGED keeps the JPEG's own colour space (no gray->BGR expansion).
    pixels = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)
    if pixels is None:
        raise ValueError("cv2.imdecode returned nothing")
    return pixels if pixels.ndim == 2 else cv2.cvtColor(pixels, cv2.COLOR_BGR2RGB)


def _imageio(data: bytes, gray: bool) -> np.ndarray:
    import imageio.v3 as iio

    return np.asarray(iio.imread(data, extension=".jpg"))


def _simplejpeg(fastdct: bool = False, fastupsample: bool = False):
    def decode(data: bytes, gray: bool) -> np.ndarray:
        import simplejpeg

        pixels = simplejpeg.decode_jpeg(data, colorspace="GRAY" if gray else "RGB",
                                        fastdct=fastdct, fastupsample=fastupsample)
        return pixels[..., 0] if gray else pixels

    return decode


def _pyav(data: bytes, gray: bool) -> np.ndarray:
    import av

    codec = av.CodecContext.create("mjpeg", "r")
    frames = codec.decode(av.Packet(data))
    if not frames:
        raise ValueError("FFmpeg's mjpeg decoder returned no frame")
    # swscale converts FFmpeg's planar YUV (yuvj420p) to RGB, upsampling the chroma itself.
    return frames[0].to_ndarray(format="gray" if gray else "rgb24")


def _pylibjpeg(data: bytes, gray: bool) -> np.ndarray:
    from libjpeg import decode

    # colour_transform=1: YCbCr -> RGB as JFIF defines it (the default 0 returns raw YCbCr).
    return decode(data, colour_transform=0 if gray else 1)


def _kornia(data: bytes, gray: bool) -> np.ndarray:
    import kornia_rs

    pixels = kornia_rs.io.decode_image_jpeg(data)
    return pixels[..., 0] if gray else pixels


def _kornia_turbo(data: bytes, gray: bool) -> np.ndarray:
    import kornia_rs

    pixels = kornia_rs.io.decode_image_jpegturbo(data, "mono" if gray else "rgb")
    return pixels[..., 0] if pixels.ndim == 3 and gray else pixels


DECODERS: dict[str, Decoder] = {d.name: d for d in (
    Decoder("pillow", "Pillow", "Pillow (libjpeg-turbo, accurate IDCT, fancy upsampling)", _pillow,
            same_library=True),
    Decoder("pyav", "av", "FFmpeg mjpeg + swscale (PyAV)", _pyav),
    Decoder("turbo-fast", "simplejpeg", "libjpeg-turbo fast IDCT + fast upsampling (simplejpeg)",
            _simplejpeg(fastdct=True, fastupsample=True)),
    Decoder("turbo-fastupsample", "simplejpeg", "libjpeg-turbo fast chroma upsampling (simplejpeg)",
            _simplejpeg(fastupsample=True)),
    Decoder("turbo-fastdct", "simplejpeg", "libjpeg-turbo fast IDCT (simplejpeg)",
            _simplejpeg(fastdct=True)),
    Decoder("pylibjpeg", "pylibjpeg-libjpeg", "Thomas Richter's libjpeg (pylibjpeg-libjpeg)",
            _pylibjpeg),
    Decoder("kornia-rs", "kornia-rs", "kornia-rs Rust decoder", _kornia),
    Decoder("opencv", "opencv-python-headless", "OpenCV imdecode (libjpeg-turbo)", _opencv,
            same_library=True),
    Decoder("imageio", "imageio", "imageio default plugin", _imageio, same_library=True),
    Decoder("simplejpeg", "simplejpeg", "simplejpeg default flags (libjpeg-turbo)",
            _simplejpeg(), same_library=True),
    Decoder("kornia-turbo", "kornia-rs", "kornia-rs libjpeg-turbo binding", _kornia_turbo,
            same_library=True),
)}  # fmt: skip

#: The module each package is imported as (availability check).
_MODULES = {"Pillow": "PIL.Image", "av": "av", "simplejpeg": "simplejpeg",
            "pylibjpeg-libjpeg": "libjpeg", "kornia-rs": "kornia_rs",
            "opencv-python-headless": "cv2", "imageio": "imageio.v3"}


def unavailable(name: str) -> str | None:
    """Why decoder ``name`` cannot run here (its package does not import), or None."""
    import importlib

    package = DECODERS[name].package
    try:
        importlib.import_module(_MODULES[package])
    except ImportError as exc:
        return f"{package} is not installed ({exc.__class__.__name__}: {exc}); pip install {package}"
    return None


def decode_all(name: str, jpegs: Sequence[bytes], gray: bool) -> list[np.ndarray]:
    """Every JPEG decoded by decoder ``name`` (a failure raises; the suite reports it)."""
    decode = DECODERS[name].decode
    return [np.ascontiguousarray(decode(data, gray), dtype=np.uint8) for data in jpegs]


def probe_jpeg() -> bytes:
    """A chroma-subsampled (4:2:0) RGB JPEG with sharp colour edges: decoders' differences show.

    Colour gradients with a checkerboard of random colour blocks, 64x96, Pillow quality 90.
    Deterministic, so the self-test is comparable between runs and machines.
    """
    from PIL import Image

    h, w = 64, 96
    y, x = np.mgrid[0:h, 0:w]
    gradient = np.stack([x * 255 // w, y * 255 // h, (x + y) * 255 // (h + w)], axis=-1)
    blocks = np.random.default_rng(0).integers(0, 256, (h // 8, w // 8, 3)).repeat(8, 0).repeat(8, 1)
    image = np.where(((x // 8 + y // 8) % 2 == 0)[..., None], gradient, blocks).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, "JPEG", quality=90, subsampling=2)
    return buffer.getvalue()
