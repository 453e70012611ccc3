"""Minimal, dependency-free reader/writer for the safetensors format.

Format: 8-byte little-endian u64 header length N, then N bytes of UTF-8 JSON
(padded with spaces so that 8 + N is a multiple of 8), then the raw
little-endian tensor bytes. The JSON maps each tensor name to
{"dtype": ..., "shape": [...], "data_offsets": [begin, end]} with offsets
relative to the start of the data section.

Only the standard library is used (struct/json/array), so this works with any
python3. Values are passed as (dtype, shape, flat list-or-bytes).
"""
import json
import struct
import sys
from array import array

# dtype -> (array typecode, element size, struct code)
DTYPES = {
    "F64": ("d", 8),
    "F32": ("f", 4),
    "I64": ("q", 8),
    "I32": ("i", 4),
}


def _to_bytes(dtype, values):
    code, size = DTYPES[dtype]
    if isinstance(values, (bytes, bytearray)):
        return bytes(values)
    a = array(code, values)
    assert a.itemsize == size, (dtype, a.itemsize)
    if sys.byteorder != "little":
        a.byteswap()
    return a.tobytes()


def save(path, tensors, order=None):
    """tensors: dict name -> (dtype, shape, flat values or raw little-endian bytes).

    Data are laid out in `order` (default: widest dtype first, then by name),
    which keeps every tensor naturally aligned in the file because the data
    section itself starts at an 8-byte boundary.
    """
    if order is None:
        order = sorted(tensors, key=lambda n: (-DTYPES[tensors[n][0]][1], n))
    header = {}
    blobs = []
    offset = 0
    for name in order:
        dtype, shape, values = tensors[name]
        blob = _to_bytes(dtype, values)
        n = 1
        for s in shape:
            n *= s
        assert len(blob) == n * DTYPES[dtype][1], (name, shape, len(blob))
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * ((-len(hjson)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for b in blobs:
            f.write(b)


def read_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n).decode("utf-8")), 8 + n


def load(path):
    """Returns dict name -> (dtype, shape, flat list of python numbers)."""
    header, start = read_header(path)
    with open(path, "rb") as f:
        raw = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        code, _ = DTYPES[info["dtype"]]
        a = array(code)
        a.frombytes(raw[start + b:start + e])
        if sys.byteorder != "little":
            a.byteswap()
        out[name] = (info["dtype"], info["shape"], a.tolist())
    return out


if __name__ == "__main__":
    # Print the header of a safetensors file: python3 tools/safetensors_py.py FILE
    h, start = read_header(sys.argv[1])
    for name, info in h.items():
        if name == "__metadata__":   # checkpoints and exports carry string metadata beside the tensors
            print(f"metadata: {info}")
            continue
        print(f"{name:40s} {info['dtype']:4s} {str(info['shape']):12s} {info['data_offsets']}")
    print(f"data section starts at byte {start}")
