"""ExecuTorch's ``executor_runner`` / ``xnn_executor_runner``
(``examples/portable/executor_runner/executor_runner.cpp``).

Log lines (ET_LOG, stderr) look like ``I 00:00:00.041207 executorch:executor_runner.cpp:623]
<message>``; the output has grown over releases, so each line is optional:

* ``Resetting threadpool with num threads = 4`` (threadpool builds, v0.4 on);
* ``Model loaded in 39.258000 ms.`` (program + method load; main from April 2026);
* ``Iteration 2 of 4: 31.904500 ms`` per execution (main from April 2026);
* ``Model executed successfully 4 time(s) in 194.011750 ms.`` (total; v0.6 on) — earlier
  releases print only ``Model executed successfully.``; then the execution time is read from
  the log timestamps of ``Inputs prepared.`` and that line (one execution, recorded as
  ``native.timing_source = "log_timestamps"``).

There is no warm-up flag: the command asks for ``warmup + runs`` executions and ``parse`` drops
the first ``warmup`` per-iteration times again. Release builds that strip logging print no
timing at all, which is an error, never a zero.
"""

from __future__ import annotations

import re

from aiot.host.native.base import NativeAdapter
from aiot.host.native.errors import NativeOutputError
from aiot.host.native.record import NUMBER, make_record, samples_from_ms, stats_from_samples

_LOG = re.compile(r"^[DIWEF] (\d+):(\d\d):(\d\d)\.(\d{6}) executorch:[^\]]*\] (.*)$")


def _messages(text: str) -> list[str]:
    """Every line's message, the ET_LOG prefix removed where there is one."""
    out = []
    for line in text.splitlines():
        found = _LOG.match(line.rstrip())
        out.append(found.group(5) if found else line.rstrip())
    return out


def _first(messages: list[str], pattern: str) -> re.Match | None:
    for message in messages:
        found = re.search(pattern, message)
        if found:
            return found
    return None


def _stamped_line(text: str, start: str) -> tuple[float, str] | None:
    """(timestamp, whole line) of the first log line whose message starts with ``start``."""
    for line in text.splitlines():
        found = _LOG.match(line.rstrip())
        if found and found.group(5).startswith(start):
            h, m, s, us = (int(g) for g in found.groups()[:4])
            return h * 3600 + m * 60 + s + us / 1e6, line.rstrip()
    return None


class ExecutorRunnerAdapter(NativeAdapter):
    """``executor_runner --model_path --num_executions=<warmup+runs> [--cpu_threads]``."""

    tool = "executor_runner"
    formats = frozenset({"executorch"})
    folds_warmup = True

    def arguments(self, binary, artifact, *, threads, warmup, runs, delegate, extra, inputs,
                  companions):
        argv = [binary, f"--model_path={artifact}", f"--num_executions={warmup + runs}"]
        if threads is not None:
            argv.append(f"--cpu_threads={threads}")
        return argv + extra

    def parse(self, text: str, *, warmup_iterations: int = 0) -> dict:
        messages = _messages(text)
        failed = _first(messages, r"(Execution of method .* failed.*|Loading of method .*)")
        if failed:
            raise NativeOutputError(self.tool, failed.group(1), text)
        iterations = [float(m.group(1)) for msg in messages
                      if (m := re.match(rf"Iteration \d+ of \d+: ({NUMBER}) ms", msg))]
        total = _first(messages, rf"Model executed successfully (\d+) time\(s\) in ({NUMBER}) ms")
        threads = _first(messages, r"Resetting threadpool with num threads = (\d+)")
        loaded = _first(messages, rf"Model loaded in ({NUMBER}) ms")
        common = {
            "threads": int(threads.group(1)) if threads and int(threads.group(1)) > 0 else None,
            "load_ms": float(loaded.group(1)) if loaded else None,
        }
        if iterations:
            return self._per_iteration(iterations, warmup_iterations, total, common, text)
        if total:
            return self._total_only(total, warmup_iterations, common)
        return self._from_timestamps(text, common)

    def _per_iteration(self, iterations, warmup, total, common, text: str) -> dict:
        if warmup >= len(iterations):
            raise NativeOutputError(self.tool, f"{len(iterations)} iteration line(s), all of "
                                    f"them warm-up ({warmup})", text)
        samples = samples_from_ms(iterations[warmup:])
        warm = iterations[:warmup]
        return make_record(
            self.backend, stats_ms=stats_from_samples(samples), samples_ns=samples,
            first_inference_ms=iterations[0],
            warmup={"count": len(warm), "mean_ms": sum(warm) / len(warm)} if warm else None,
            native={"raw_summary": total.group(0) if total else None,
                    "total_ms": float(total.group(2)) if total else None,
                    "timing_source": "iteration_lines"},
            **common,
        )

    def _total_only(self, total: re.Match, warmup: int, common) -> dict:
        # Without per-iteration lines the warm-up cannot be split off: say so in the record.
        count, total_ms = int(total.group(1)), float(total.group(2))
        return make_record(
            self.backend, stats_ms={"mean": total_ms / count, "count": count},
            native={"raw_summary": total.group(0), "total_ms": total_ms,
                    "timing_source": "total_line", "includes_warmup_iterations": warmup},
            **common,
        )

    def _from_timestamps(self, text: str, common) -> dict:
        start = _stamped_line(text, "Inputs prepared.")
        end = _stamped_line(text, "Model executed successfully.")
        if start is None or end is None:
            raise NativeOutputError(self.tool, "no timing lines (a build with logging "
                                    "stripped prints none)", text)
        return make_record(
            self.backend, stats_ms={"mean": (end[0] - start[0]) * 1e3, "count": 1},
            native={"raw_summary": [start[1], end[1]], "timing_source": "log_timestamps",
                    "note": "one execution, timed between the 'Inputs prepared.' and "
                            "'Model executed successfully.' log lines"},
            **common,
        )
