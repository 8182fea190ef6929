#!/usr/bin/env python3
"""Bytes per record type of one agent code map (codemap.vpm), raw and compressed.

Used by bench/run-jvm.sh to say where a code map's size per method goes. Reads the
container of common/chunkfile.h: a file header whose header_size field says where the
chunks start, then chunks {magic, comp_size, raw_size, crc32, nrecords, header_crc} of
zlib-compressed records {type, size, time}; record types from maps/codemap_format.h.
Usage: codemap-breakdown.py CODEMAP.vpm
"""
import collections
import struct
import sys
import zlib

TYPES = {1: 'META', 2: 'EPOCH_BEGIN', 3: 'METHOD_LOAD', 4: 'METHOD_UNLOAD', 5: 'INLINE',
         6: 'METHOD_NAME', 7: 'CODE_BLOB', 8: 'EPOCH_END', 9: 'METHOD_PTR', 10: 'INLINE2',
         11: 'METHOD_LOAD2', 12: 'METHOD_NAMES'}
CHUNK_MAGIC = 0x4b4e4843


def main(path):
    data = open(path, 'rb').read()
    off = struct.unpack_from('<IHH', data, 0)[2]
    raw_total = comp_total = chunks = 0
    size = collections.Counter()
    count = collections.Counter()
    while off + 24 <= len(data):
        magic, comp, raw_size, _, _, _ = struct.unpack_from('<6I', data, off)
        if magic != CHUNK_MAGIC or off + 24 + comp > len(data):
            break  # a torn tail: the reader stops at the last complete chunk too
        raw = zlib.decompress(data[off + 24:off + 24 + comp])
        off += 24 + comp
        chunks += 1
        raw_total += raw_size
        comp_total += comp
        p = 0
        while p + 8 <= len(raw):
            rtype, rsize = struct.unpack_from('<II', raw, p)
            if rsize < 16:
                break
            name = TYPES.get(rtype, str(rtype))
            size[name] += rsize
            count[name] += 1
            p += rsize
    if not chunks:
        sys.exit(f'codemap-breakdown: no chunk in {path}; is it a viprof code map?')
    print(f'{len(data)} B on disk in {chunks} chunks: {raw_total} B of records, zlib ratio '
          f'{raw_total / max(comp_total, 1):.2f}')
    for name, n in size.most_common():
        print(f'  {name:14s} {count[name]:7d} records {n:9d} B raw ({100 * n / raw_total:4.1f}%) '
              f'{n / count[name]:7.1f} B/record')


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit('usage: codemap-breakdown.py CODEMAP.vpm')
    main(sys.argv[1])
