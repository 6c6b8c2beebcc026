"""Where the bytes of a start-indexed shard are, for tests that damage one on purpose: since
issue 23 a shard is padded to a 4096-byte boundary past its last chunk (spec-notes/
trajectory.md "Power cuts without powersafe overwrite"), so its last bytes are zeros that
no index entry covers."""
import struct

_EMPTY = 2**64 - 1


def end_of_chunks(shard: bytes) -> int:
    """Where the last inner chunk of a start-indexed shard ends (empty entries skipped; the
    entries stop at the index's checksum and the zeros of its page)."""
    ends = []
    for at in range(0, len(shard) - 16, 16):
        offset, size = struct.unpack_from("<QQ", shard, at)
        if offset == _EMPTY:
            continue
        if offset == 0 or offset + size > len(shard):
            break
        ends.append(offset + size)
    if not ends:
        raise ValueError("no inner chunk in this shard")
    return max(ends)
