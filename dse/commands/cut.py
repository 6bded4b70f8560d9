"""`dse cut`: write the model cut where its outputs vary with its input
(`cascader.verify.cut`), so that `dse verify` and `dse simulate` compare outputs that a wrong
weight or register would change."""

from __future__ import annotations

import argparse
from pathlib import Path

import tflite
from ai_edge_litert import schema_py_generated as schema

from cascader.frontend.errors import ModelError
from cascader.frontend.tflite_import import load_tflite
from cascader.verify.cut import CUT_DESCRIPTION, cut_at, cut_where_varying
from cascader.verify.litert import MIN_DISTINCT
from dse.errors import BadInput
from dse.output import write_file


def run(args: argparse.Namespace) -> int:
    try:
        model = load_tflite(args.model)
    except ModelError as error:
        raise BadInput(str(error)) from None
    try:
        cut, outputs = cut_where_varying(model, args.samples)
    except ValueError as error:
        raise BadInput(f"{args.model}: {error}; it cannot be cut where it varies") from None
    except RuntimeError as error:  # LiteRT's, for a model its kernels cannot run
        raise BadInput(
            f"{args.model}: LiteRT cannot run it: {str(error).splitlines()[0]}"
        ) from None
    sub = schema.ModelT.InitFromPackedBuf(cut, 0).subgraphs[0]
    names = ", ".join(
        f"{sub.tensors[t].name.decode()} ({found.distinct} values)" for t, found in outputs.items()
    )
    written = cut_at(cut, list(outputs)) if cut is model else cut  # a cut's description either way
    write_file(Path(args.output), written, _is_cut, "cut model")
    if cut is model:
        print(f"wrote {args.output}: the model whole, each output takes {MIN_DISTINCT}+ values "
              f"that vary ({names})")  # fmt: skip
    else:
        print(f"wrote {args.output}: {len(sub.operators)} operators, outputs {names}")
    return 0


def _is_cut(data: bytes) -> bool:
    """Whether bytes are a model `dse cut` wrote (one it did not cut is written as given and
    is not taken for one)."""
    try:
        return tflite.Model.GetRootAsModel(data, 0).Description() == CUT_DESCRIPTION
    except Exception:  # any damage: not ours
        return False
