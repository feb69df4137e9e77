#!/usr/bin/env python3
"""check_svg.py - run a program that writes an SVG (its last argument is replaced by the output path)
and check that the file is well-formed XML with the pictures `reshardc stats --svg` promises."""
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"


def main():
    cmd = sys.argv[1:]
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "stats.svg")
        cmd = [out if a == "@SVG@" else a for a in cmd]
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL)
        if r.returncode != 0:
            print("command failed:", " ".join(cmd), file=sys.stderr)
            return 1
        root = ET.parse(out).getroot()  # raises on malformed XML
        if root.tag != NS + "svg":
            print("root element is", root.tag, file=sys.stderr)
            return 1
        texts = " ".join("".join(t.itertext()) for t in root.iter(NS + "text"))
        for want in ("lower bound", "this plan (modeled)", "gather-broadcast (modeled)", "direct (modeled)",
                     "traffic, sender (row) x receiver (column)", "NIC load", "step timeline"):
            if want not in texts:
                print("missing text:", want, file=sys.stderr)
                return 1
        rects = len(list(root.iter(NS + "rect")))
        if rects < 20:
            print("too few shapes:", rects, file=sys.stderr)
            return 1
        for a in ("width", "height"):
            if float(root.get(a)) <= 0:
                print("bad", a, file=sys.stderr)
                return 1
    print("ok: well-formed SVG with", rects, "rectangles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
