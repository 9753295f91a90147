"""Training zoo models on a dataset (:mod:`~aiot.host.training.trainer`) and storing the
outcome as a ``train`` record (:mod:`~aiot.host.training.record`)."""
