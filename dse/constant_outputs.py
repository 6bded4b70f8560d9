"""The warning `dse verify` and `dse simulate` print when an output they compared hardly
varies over the samples: a difference of 0 there proves little."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from cascader.verify.litert import MIN_DISTINCT, DiffStats


def warn_constant(command: str, model: str, outputs: Sequence[DiffStats], samples: int) -> None:
    """One line on stderr per output that is not `DiffStats.telling`."""
    for out in outputs:
        if not out.telling:
            print(
                f"{command}: warning: output {out.output} takes {out.distinct} distinct "
                f"value(s) over {samples} sample(s) and {out.varying:.1%} of it varies "
                f"(fewer than {MIN_DISTINCT} values, or none varying, prove little); check "
                f"`dse cut --model {model} -o cut.tflite` too",
                file=sys.stderr,
            )
