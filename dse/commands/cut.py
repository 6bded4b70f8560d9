"""`dse cut`: write the model cut where its outputs vary with its input
(`cascader.verify.cut`), so that `dse verify` and `dse simulate` compare outputs that a wrong
weight or register would change."""

from __future__ import annotations

import argparse
from pathlib import Path

from ai_edge_litert import schema_py_generated as schema

from cascader.frontend.errors import ModelError
from cascader.frontend.tflite_import import load_tflite
from cascader.verify.cut import cut_where_varying, variations
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
    found = variations(cut, args.samples)
    names = ", ".join(
        f"{sub.tensors[t].name.decode()} ({found[t].distinct} values)" for t in outputs
    )
    write_file(Path(args.output), cut)
    if cut is model:
        print(f"wrote {args.output}: the model whole, each output takes {MIN_DISTINCT}+ values "
              f"that vary ({names})")  # fmt: skip
    else:
        print(f"wrote {args.output}: {len(sub.operators)} operators, outputs {names}")
    return 0
