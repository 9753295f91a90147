"""The timing audit (issue 53, item 3): a run whose numbers do not add up is INVALID "timing
implausible", with both numbers. The device's real agent runs; its result is rewritten on the
way (``_agent_rewriter.py``): invoke times scaled so that they sum to more than the timed
loop's own wall time, or to a hundredth of it (a time taken before the work finished), the
statistics recomputed so that every other check the host makes passes."""

from __future__ import annotations

import json

import pytest

from tests.faults.conftest import count_records
from tests.faults.test_r3_hostile_agent import RUN, hostile_agent  # noqa: F401 - a fixture


@pytest.mark.fault("device reports invoke times that do not add up to its timed loop")
@pytest.mark.parametrize("mode, says", [
    ("times-over-wall", "more than the timed loop's own"),
    ("times-before-work", "is accounted for by nothing"),
])
def test_times_that_do_not_add_up_are_invalid(cli, hostile_agent, fault, mode, says):  # noqa: F811
    hostile_agent(mode)
    before = count_records()
    result = cli(*RUN, "-d", "local", "--min-runs", "400")
    assert "Traceback" not in result.output
    [record] = json.loads(result.stdout)
    assert record["status"] == "ok" and record["validity"] == "INVALID", record
    reasons = record["result"]["validity"]["reasons"]
    (audit,) = [r for r in reasons if r.startswith("timing implausible")]
    assert says in audit and "ms" in audit
    fault.records_lost(before + 1, count_records())
