"""Do two safetensors files hold the same tensors, byte for byte?

python3 tools/same_tensors.py A.safetensors B.safetensors

Compares every tensor's dtype, shape and raw bytes (weights and, in a checkpoint,
the AdamW moments), and ignores the header's __metadata__: a checkpoint's config
text gains fields as normlab grows, while the arithmetic that made the tensors
may be unchanged. Exit status 0 when they match, 1 when they differ (the first
differing names are printed). docs/studies.md uses it to show that two normlab
binaries train alike.
"""
import sys

from safetensors_py import read_header


def tensors(path):
    header, start = read_header(path)
    with open(path, "rb") as f:
        raw = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        out[name] = (info["dtype"], info["shape"], raw[start + b:start + e])
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: python3 tools/same_tensors.py A.safetensors B.safetensors")
    a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
    differ = sorted(n for n in a.keys() | b.keys() if a.get(n) != b.get(n))
    print(f"{len(a)} and {len(b)} tensors, {len(differ)} differ"
          + (": " + ", ".join(differ[:5]) if differ else ""))
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
