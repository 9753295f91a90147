"""Round 4, a CI gate on a model that changes: a user's model file whose next commit is 8x
slower (another artifact, the same configuration) was "not comparable", exit 3, and the
hint's --allow-missing made the gate pass. The commits are tests/changed_model.py's."""

from __future__ import annotations

import pytest

from tests.changed_model import (  # noqa: F401 (changed_model: a fixture)
    assert_fails_whatever_flags,
    changed_model,
    compare,
)
from tests.faults.conftest import count_records


@pytest.mark.slow
@pytest.mark.fault("the gate on a changed model that is 8x slower")
def test_the_gate_fails_a_changed_model_that_is_8x_slower(cli, fault, changed_model, tmp_path):
    commits = changed_model
    before = count_records(commits.results)
    result = compare(cli, commits, "slow", code=1)  # a regression: not 3, never 0
    verdict = result.stderr.splitlines()[-1]
    assert verdict.startswith("gate failed (median:20%): 1 run(s) failed; 1 pair(s) compared "
                              "(1 of another artifact)"), verdict
    assert_fails_whatever_flags(cli, commits, "slow", result, tmp_path)
    compare(cli, commits, "comment")  # and a comment-only commit still passes
    fault.records_lost(before, count_records(commits.results))
