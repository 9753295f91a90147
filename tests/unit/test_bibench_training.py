"""Binarized training on real data (scikit-learn digits): all eight BiBench algorithms learn,
fine-tuning starts from the same-recipe FP model, and an interrupted run resumes exactly."""

from __future__ import annotations

import importlib.util
from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")

from aiot.core.errors import UnknownName
from aiot.host.training.trainer import TrainConfig, train
from aiot.models.bibench import ALGORITHMS

pytestmark = pytest.mark.skipif(importlib.util.find_spec("sklearn") is None,
                                reason="scikit-learn is not installed")

# tiny_cnn binarized: conv2 (16->32) and conv3 (32->64); stem conv and classifier stay FP.
BASE = TrainConfig(model="tiny_cnn", dataset="digits", epochs=2, batch_size=64, lr=3e-3, seed=0)


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    return tmp_path_factory.mktemp("weights")


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ALGORITHMS.names())
def test_every_algorithm_learns_digits(algorithm, weights):
    result = train(replace(BASE, binarize=algorithm), weights_dir=weights)
    assert result.test_accuracy > 0.5, result  # chance is 0.1
    assert result.weights_path.name.startswith(f"tiny_cnn.{algorithm}-digits-")
    assert len(result.history) == 2 and result.history[-1]["train_loss"] < 2.3


@pytest.mark.slow
def test_binarized_training_fine_tunes_the_cached_fp_model(weights):
    bnn = train(replace(BASE, binarize="bnn"), weights_dir=weights)
    fp = train(BASE, weights_dir=weights)
    assert fp.cached  # trained once, as the starting point of every binarized run
    # The key follows the starting point: from-scratch training is a different run.
    scratch = replace(BASE, binarize="bnn", init="scratch")
    assert scratch.key() != bnn.config.key() and BASE.key() != bnn.config.key()
    # Aliases name the same run.
    assert replace(BASE, binarize="BNN").key() == bnn.config.key()


def test_unknown_algorithm_fails_before_training(weights):
    with pytest.raises(UnknownName):
        train(replace(BASE, binarize="xnr"), weights_dir=weights)


class _Interrupt:
    """A progress callback that presses Ctrl-C at one training step."""

    def __init__(self, at_step: int) -> None:
        self.at_step = at_step

    def __call__(self, phase: str, done: int, total: int) -> None:
        if phase == "train" and done == self.at_step:
            raise KeyboardInterrupt


@pytest.mark.slow
def test_an_interrupted_run_keeps_its_checkpoint_and_resumes_to_the_same_weights(tmp_path):
    config = replace(BASE, binarize="reactnet", epochs=2, init="scratch", threads=1)
    steps_per_epoch = -(-1437 // 64)
    with pytest.raises(KeyboardInterrupt):
        train(config, progress=_Interrupt(steps_per_epoch + 3), weights_dir=tmp_path / "a")
    checkpoints = list((tmp_path / "a").glob("*.ckpt"))
    assert len(checkpoints) == 1 and not list((tmp_path / "a").glob("*.pt"))  # no half result
    calls = []
    resumed = train(config, progress=lambda *a: calls.append(a), weights_dir=tmp_path / "a")
    train_steps = [c for c in calls if c[0] == "train"]
    assert train_steps[0][1] == steps_per_epoch + 1  # started at the second epoch
    assert not list((tmp_path / "a").glob("*.ckpt"))  # deleted once the weights are saved
    straight = train(config, weights_dir=tmp_path / "b")
    a = torch.load(resumed.weights_path, weights_only=True)
    b = torch.load(straight.weights_path, weights_only=True)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert resumed.test_accuracy == straight.test_accuracy
