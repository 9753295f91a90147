"""Datasets for training and on-device accuracy: Fashion-MNIST, scikit-learn digits, image folders.

Usage::

    from aiot.models.datasets import load_dataset
    from aiot.models import get_model_spec

    spec = get_model_spec("tiny_cnn")
    x, y = load_dataset("fashion-mnist", spec.input, split="test", limit=1000)

Names: ``fashion-mnist`` (aliases ``fashion_mnist``, ``fmnist``), ``digits`` and
``folder:PATH`` (see :mod:`aiot.models.datasets.image_folder`). Importing this package needs
only numpy; scikit-learn and Pillow are imported when a source needs them.
"""

from aiot.models.datasets.base import DATASETS, FOLDER_PREFIX, SPLITS, DatasetInfo, RawDataset
from aiot.models.datasets.load import dataset_fingerprint, load_dataset, load_raw, select_subset

# Importing the sources registers them in DATASETS (order = listing order).
from aiot.models.datasets import fashion_mnist, digits  # noqa: E402,F401  isort: skip
from aiot.models.datasets.preprocess import preprocess  # noqa: E402

__all__ = [
    "DATASETS",
    "FOLDER_PREFIX",
    "SPLITS",
    "DatasetInfo",
    "RawDataset",
    "dataset_fingerprint",
    "load_dataset",
    "load_raw",
    "preprocess",
    "select_subset",
]
