"""A child process that decodes Ethos-U weight streams with `ethosu.mlw_codec.decode`.

The codec's C decoder ends its process when a stream runs out before its end-of-stream
marker (printing its complaint on stdout), so it runs here, apart from the simulator: a dead
worker is a stream that does not decode. Requests come on stdin (a little-endian uint32
length, then the stream); answers go out on the process's original stdout (a uint32 count,
then that many native int16 weights), while file descriptor 1 itself points at the null
device so the codec's prints cannot corrupt them. Standard library and the codec only.
"""

import os
import struct
import sys
from array import array

from ethosu import mlw_codec


def main() -> None:
    source = sys.stdin.buffer
    sink = os.fdopen(os.dup(1), "wb")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    while True:
        header = source.read(4)
        if len(header) < 4:
            return
        (length,) = struct.unpack("<I", header)
        values = array("h", mlw_codec.decode(bytearray(source.read(length))))
        sink.write(struct.pack("<I", len(values)))
        sink.write(values.tobytes())
        sink.flush()


if __name__ == "__main__":
    main()
