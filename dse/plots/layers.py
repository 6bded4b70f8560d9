"""Per-layer cost of one point: cycles and bytes moved per TFLite operator (the NPU ops of a
decomposed softmax or mean summed into their operator), labelled with the model's names."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from dse.plots.figure import KIB, Plot, save, short_name

__all__ = ["layer_plot", "layer_rows"]


def layer_rows(ops: list[dict]) -> list[dict]:
    """The point's per-op rows merged per TFLite operator, in model order: name, operator,
    NPU ops, stripes, cycles, MACs, bytes moved. Rows without an operator index (a graph
    study's) stay one per NPU op."""
    merged: dict[object, dict] = {}
    for position, op in enumerate(ops):
        key = op.get("tflite_index")
        key = ("op", key) if key is not None else ("npu", position)
        row = merged.setdefault(
            key,
            {
                "name": op["name"],
                "operator": _operator(op),
                "npu_ops": 0,
                "stripes": 0,
                "cycles": 0.0,
                "macs": 0,
                "bytes": 0.0,
            },
        )
        row["npu_ops"] += 1
        row["stripes"] += op.get("stripes", 0)
        row["cycles"] += op.get("cycles", 0.0)
        row["macs"] += op.get("macs", 0)
        row["bytes"] += sum((op.get("bytes") or {}).values())
    return list(merged.values())


def _operator(op: dict) -> str:
    if op.get("tflite_op") is None:
        return op.get("kind", "?")
    return f"{op['tflite_op']} #{op['tflite_index']}"


def layer_plot(
    trial_number: int, ops: list[dict], out: Path, with_bytes: bool = True
) -> Plot | None:
    """Horizontal bars of cycles and (`with_bytes`) bytes moved per layer; None without
    per-op rows. A Vela point's report gives no bytes per operation."""
    rows = layer_rows(ops)
    if not rows:
        return None
    labels = [f"{short_name(r['name'])}  {r['operator']}" for r in rows]
    height = max(3.0, 0.24 * len(rows) + 1.2)
    if with_bytes:
        fig, (left, right) = plt.subplots(1, 2, figsize=(11, height), sharey=True)
        right.barh(labels, [r["bytes"] / KIB for r in rows], color="tab:green")
        right.set_xlabel("bytes moved (KiB, all memories)")
        axes = (left, right)
        alt = f"Per-layer cycles and memory traffic of trial {trial_number}"
    else:
        fig, left = plt.subplots(figsize=(8, height))
        axes = (left,)
        alt = f"Per-layer cycles of trial {trial_number} (Vela's per-layer report)"
    left.barh(labels, [r["cycles"] / 1000 for r in rows], color="tab:blue")
    left.set_xlabel("cycles (thousands)")
    left.margins(y=0.5 / len(rows))  # half a bar above the first and below the last
    left.invert_yaxis()
    left.tick_params(axis="y", labelsize=7)
    for ax in axes:
        ax.grid(True, axis="x", alpha=0.3)
    left.set_title(f"trial {trial_number}: cost per TFLite operator", loc="left")
    return save(fig, out, "layers", alt)
