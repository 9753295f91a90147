"""Agent fidelity: does the device agent measure what the runtime's own benchmark tool measures?

For one ``.tflite`` model and each thread count, alternates rounds of
(a) the aiot device agent on the local device (``AgentSession.run``, as ``aiot run`` does) and
(b) ``python -m ai_edge_litert.tools.benchmark_litert_model`` on the same file,
and reports the ratio of their steady-state medians (target 0.98–1.02). Alternating rounds
in one run keeps machine noise from favouring either side.

Usage: ``python bench/agent_fidelity.py [--model mobilenet_v2] [--threads 1,2] [--rounds 15]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_json  # noqa: E402

TARGET = (0.98, 1.02)


def reference_median_ms(model: Path, threads: int, runs: int, warmup: int) -> float:
    """Median latency reported by LiteRT's own Python benchmark tool."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        subprocess.run(
            [sys.executable, "-m", "ai_edge_litert.tools.benchmark_litert_model", f"--model={model}",
             f"--num_threads={threads}", f"--num_runs={runs}", f"--warmup_runs={warmup}",
             f"--result_json={out}"],
            check=True, capture_output=True, text=True,
        )
        return float(json.loads(out.read_text())["latency"]["median_ms"])


def agent_median_ms(session, remote: str, threads: int, runs: int, warmup: int) -> float:
    """Median steady-state latency measured by the aiot device agent."""
    spec = {"v": 1, "backend": "litert", "artifact": remote, "threads": threads, "warmup_runs": warmup,
            "warmup_min_s": 0.0, "min_runs": runs, "min_s": 0.0, "max_s": 600.0, "seed": 0, "dataset": None}
    return float(session.run(spec)["stats_ms"]["median"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="mobilenet_v2")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()

    from aiot.converters.api import convert_model
    from aiot.core.paths import cache_dir
    from aiot.host.devices.agent_client import AgentSession
    from aiot.host.devices.deploy import push_file
    from aiot.host.transports.local import LocalTransport

    conv = convert_model(args.model, "tflite", cache_dir() / "bench-artifacts")
    transport = LocalTransport()
    rows, results = [], []
    with AgentSession(transport) as session:
        remote = push_file(transport, conv.artifact, conv.sha256).remote
        for threads in (int(t) for t in args.threads.split(",")):
            agent, ref = [], []
            for _ in range(args.rounds):
                agent.append(agent_median_ms(session, remote, threads, args.runs, args.warmup))
                ref.append(reference_median_ms(conv.artifact, threads, args.runs, args.warmup))
            ratio = statistics.median(agent) / statistics.median(ref)
            ok = TARGET[0] <= ratio <= TARGET[1]
            results.append({"threads": threads, "agent_median_ms": agent, "reference_median_ms": ref,
                            "ratio": ratio, "within_target": ok})
            rows.append([threads, f"{statistics.median(agent):.3f}", f"{statistics.median(ref):.3f}",
                         f"{ratio:.3f}", "PASS" if ok else "FAIL"])
    print(f"model {args.model} ({conv.artifact.name}, {conv.size_bytes / 1e6:.1f} MB), "
          f"{args.rounds} alternating rounds of {args.runs} runs")
    print_table(["threads", "agent median ms", "benchmark_litert_model median ms", "ratio", "0.98–1.02"], rows)
    path = write_json("agent_fidelity", {"model": args.model, "artifact_sha256": conv.sha256,
                                         "target": TARGET, "results": results})
    print(f"wrote {path}")
    return 0 if all(r["within_target"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
