"""Which TFLite operator each expression of an imported model came from.

Relax variable names do not survive partitioning (pattern fusion and merging rename every
binding), but call spans do. So the import stamps every expression it builds for a TFLite
operator with a span naming that operator: the source name is the operator's type and its
output tensor's name ("CONV_2D model/conv1/Relu"; an operator with several outputs, a split,
lists them one a line), the line its index in the subgraph, and the column 1 on the
expression that is the operator's output (0 on the ones inside it).
Legalization reads the span of each composite's result to name the NPU ops after the model,
as Vela's per-layer report does."""

from __future__ import annotations

import tvm
from tvm import relax

from cascader.ir.origins import TfliteOrigin

__all__ = ["origin_of", "stamp"]


def _span(origin: TfliteOrigin, output: bool) -> tvm.ir.Span:
    source = tvm.ir.SourceName(f"{origin.op} " + "\n".join(origin.tensors))
    return tvm.ir.Span(source, origin.index, origin.index, int(output), int(output))


def origin_of(expr: relax.Expr) -> tuple[TfliteOrigin, bool] | None:
    """The operator `expr` was imported for, and whether it is that operator's output;
    None for an expression the import did not stamp."""
    span = getattr(expr, "span", None)
    if span is None or span.source_name is None:
        return None
    op, sep, tensors = str(span.source_name.name).partition(" ")
    if not sep or not op.isupper():
        return None
    return TfliteOrigin(tuple(tensors.split("\n")), int(span.line), op), bool(span.column)


def stamp(
    expr: relax.Expr, origin: TfliteOrigin, bb: relax.BlockBuilder, output: bool = True
) -> relax.Expr:
    """`expr` and every call, tuple and tuple item under it that no other operator stamped
    (those are earlier operators' results) carried with `origin`'s span; `expr` itself is
    marked as the operator's output when `output`. Normalizing an expression rebuilds every
    call whose arguments are not bound yet, and a rebuilt call loses its span; so each is
    normalized as it is made (its span put back if it lost it) and those inside are bound
    in `bb`'s block at once. Shared subexpressions stay shared."""
    memo: dict[relax.Expr, relax.Expr] = {}
    inner = _span(origin, False)

    def walk(node: relax.Expr, span: tvm.ir.Span) -> relax.Expr:
        if not isinstance(node, relax.Call | relax.Tuple | relax.TupleGetItem):
            return node
        if origin_of(node) is not None:
            return node
        if node not in memo:
            if isinstance(node, relax.Call):
                args = [walk(a, inner) for a in node.args]
                made = _settled(bb, relax.Call(node.op, args, node.attrs, node.ty_args, span))
            elif isinstance(node, relax.Tuple):
                made = relax.Tuple([walk(f, inner) for f in node.fields], span)
            else:
                made = relax.TupleGetItem(walk(node.tuple_value, inner), node.index, span)
            inside = span is inner and not isinstance(made, relax.Tuple)
            memo[node] = bb.emit(made) if inside else made
        return memo[node]

    return walk(expr, _span(origin, output))


def _settled(bb: relax.BlockBuilder, call: relax.Call) -> relax.Call:
    """`call` normalized, with its span."""
    done = bb.normalize(call)
    if isinstance(done, relax.Call) and origin_of(done) is None:
        done = relax.Call(done.op, done.args, done.attrs, done.ty_args, call.span)
    return done
