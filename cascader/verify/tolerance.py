"""How many steps of an output's quantisation the NPU's arithmetic may differ from LiteRT's, per
kernel set: one home for the tolerance `dse verify` and `dse simulate` apply.

- `reference` (BUILTIN_REF, the arithmetic Vela programs the NPU with): equal but where TFLite's
  reference FULLY_CONNECTED rounds once and the NPU twice, one step at that layer's output. A
  chain of fully connected layers passes such steps on: over 8 samples the shared
  ad_autoencoder's ten layers end 2 steps apart on 0.08% of its elements. So the tolerance is
  the number of FULLY_CONNECTED operators on the longest path to the output, at least one.
- `builtin` (the optimised kernels): one step. They also round some ties unlike any NPU
  rounding mode (TRANSPOSE_CONV, some CONV_2D: a negative half goes up), which grows through
  the layers after it (7-8 steps at a U-Net's output); that is why a model the NPU runs whole
  is compared with the reference kernels, and such a difference fails the check."""

from __future__ import annotations

from ai_edge_litert import schema_py_generated as schema

BUILTIN_TOLERANCE = 1


def litert_tolerance(model: bytes, kernels: str) -> int:
    """The steps an output of `model` may differ from LiteRT's `kernels` ("reference" or
    "builtin") for the NPU's arithmetic to be called equal to it."""
    if kernels != "reference":
        return BUILTIN_TOLERANCE
    tree = schema.ModelT.InitFromPackedBuf(model, 0)
    sub = tree.subgraphs[0]
    codes = tree.operatorCodes
    fully_connected = schema.BuiltinOperator.FULLY_CONNECTED
    depth: dict[int, int] = {}  # tensor -> FULLY_CONNECTED operators on its longest path
    for op in sub.operators:  # operators are stored in an order that runs
        code = codes[op.opcodeIndex]
        own = int(max(code.builtinCode, code.deprecatedBuiltinCode) == fully_connected)
        reached = max((depth.get(int(t), 0) for t in op.inputs if t >= 0), default=0) + own
        for t in op.outputs:
            depth[int(t)] = reached
    return max(1, *(depth.get(int(t), 0) for t in sub.outputs))
