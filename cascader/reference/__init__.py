"""Bit-exact integer reference of the NPU primitive ops, as the flow legalizes them.

`run.run_reference(model, inputs)` runs a fully NPU model, `run.run_function` one legalized
function, `run.run_op` one op; `run.op_reads` / `run.run_op_box` compute one stripe of an op
from only the input boxes it reads; `litert.compare_with_litert` measures the distance to
ai-edge-litert on the original model.
"""
