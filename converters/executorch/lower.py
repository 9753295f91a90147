"""Lower an exported PyTorch program to an ExecuTorch ``.pte``.

Runs INSIDE the ``executorch`` toolchain environment as a script:
``python lower.py PROGRAM.pt2 OUT.pte xnnpack|portable``. aiot's own process does
the ``torch.export`` (same torch version on both sides) and hands over the saved program;
this script imports nothing from aiot. It prints one JSON line: the operators left in the
lowered graph (``executorch_call_delegate`` for each XNNPACK partition, ``aten`` ops run by
the portable kernels) and the versions that shaped the file.

The program is aiot's own save of a module it already loaded safely (a user's ``.pt2`` goes
through ``aiot.core.safe_load`` first); still, every ``torch.load`` here is weights-only
(torch's own switch), so ``torch.export.load``'s fallback to an unsafe load cannot run.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter


def main(argv: list[str]) -> int:
    program_path, out_path, delegate = argv
    os.environ.pop("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", None)
    os.environ["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] = "1"
    from importlib.metadata import version

    import torch
    from executorch.exir import to_edge_transform_and_lower

    program = torch.export.load(program_path)
    partitioners = []
    if delegate == "xnnpack":
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        partitioners.append(XnnpackPartitioner())
    edge = to_edge_transform_and_lower(program, partitioner=partitioners)
    graph = edge.exported_program().graph_module.graph
    ops = Counter(str(n.target) for n in graph.nodes
                  if n.op == "call_function" and "getitem" not in str(n.target))
    convs = delegated_convs(edge.exported_program().graph_module)
    with open(out_path, "wb") as fh:
        fh.write(edge.to_executorch().buffer)
    print(json.dumps({"ops": dict(ops), "delegated_convs": convs,
                      "versions": {"executorch": version("executorch"), "torch": version("torch")}}))
    return 0


def delegated_convs(graph_module) -> dict:
    """Convolutions inside the XNNPACK partitions: ``int8`` where both the input and the weight
    come dequantized from int8 (XNNPACK runs them as QS8 convolutions), ``float`` otherwise."""
    counts = {"int8": 0, "float": 0}
    for node in graph_module.graph.nodes:
        if node.op != "get_attr" or not node.target.startswith("lowered_module"):
            continue
        for conv in getattr(graph_module, node.target).original_module.graph.nodes:
            if conv.op != "call_function" or "convolution" not in str(conv.target):
                continue
            sources = [str(getattr(arg, "target", "")) for arg in conv.args[:2]]
            integer = "dequantize_per_tensor" in sources[0] and "dequantize_per_channel" in sources[1]
            counts["int8" if integer else "float"] += 1
    return counts


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
