#!/usr/bin/env python3
"""check_cli.py RESHARDC LAYOUT - compile LAYOUT, run `reshardc stats` on the plan in every output mode and
check the report: the JSON keys, the bound against a hand computation (tests/stats/tiny.layout), internal
consistency, the SVG as XML, and the exit codes of bad invocations."""
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

KEYS = ["lower_bound_s", "modeled_s", "gather_broadcast_s", "direct_s", "net_bytes", "nvl_bytes",
        "max_nic_bytes", "mean_nic_bytes", "relay_bytes", "dst_bound_s", "src_bound_s",
        "lower_bound_no_relay_s", "ratio_to_bound", "speedup_gather_broadcast", "speedup_direct",
        "busiest_link", "params", "model_bytes"]


def fail(msg):
    print("FAIL:", msg, file=sys.stderr)
    sys.exit(1)


def near(a, b, what):
    if abs(a - b) > 1e-9 * abs(b) + 1e-15:
        fail(f"{what}: {a} != {b}")


def main():
    reshardc, layout = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as d:
        plan, svg = os.path.join(d, "p.bin"), os.path.join(d, "p.svg")
        subprocess.run([reshardc, layout, "-o", plan, "--quiet"], check=True)
        r = subprocess.run([reshardc, "stats", plan, "--json", "--svg", svg], check=True, capture_output=True,
                           text=True)
        j = json.loads(r.stdout)
        for k in KEYS:
            if k not in j:
                fail("missing key " + k)
        # 1000 x 256 + 4 x 256 x 1024 bf16 elements, every one needed in both inference domains
        model = (1000 * 256 + 4 * 256 * 1024) * 2
        if j["model_bytes"] != model:
            fail(f"model_bytes {j['model_bytes']} != {model}")
        nic = 400e9 / 8
        near(j["dst_bound_s"], model / (4 * nic), "dst bound")
        near(j["src_bound_s"], model / (4 * nic), "src bound (with relays)")
        near(j["lower_bound_no_relay_s"], 2 * model / (4 * nic), "bound without relays")
        near(j["lower_bound_s"], model / (4 * nic), "lower bound")
        if j["modeled_s"] < j["lower_bound_no_relay_s"] * (1 - 1e-9):
            fail("modeled time below the bound")
        near(j["ratio_to_bound"], j["modeled_s"] / j["lower_bound_s"], "ratio")
        near(j["speedup_gather_broadcast"], j["gather_broadcast_s"] / j["modeled_s"], "speedup")
        if j["net_bytes"] < 2 * model:
            fail("less than the model crossed into each domain")
        if j["relay_bytes"] != 0:
            fail("relay bytes in a plan without relays")
        if j["max_nic_bytes"] < j["mean_nic_bytes"]:
            fail("max NIC below mean")
        ET.parse(svg)
        # the gather-broadcast baseline on a thread of its own (RESHARD_THREADS=2) or not: the same report
        reports = []
        for n in ("1", "2"):
            env = dict(os.environ, RESHARD_THREADS=n)
            reports.append(subprocess.run([reshardc, "stats", plan, "--json"], check=True, capture_output=True,
                                          env=env).stdout)
        if reports[0] != reports[1] or reports[0] != r.stdout.encode():
            fail("the report differs between one thread and two")
        t = subprocess.run([reshardc, "stats", plan, "--nic-gbps", "200"], check=True, capture_output=True,
                           text=True).stdout
        for want in ("lower bound", "[modeled]", "gather-broadcast", "direct", "busiest link", "NIC 200 Gb/s"):
            if want not in t:
                fail("text report lacks " + repr(want))
        j2 = json.loads(subprocess.run([reshardc, "stats", plan, "--json", "--nic-gbps", "200"], check=True,
                                       capture_output=True, text=True).stdout)
        near(j2["lower_bound_s"], 2 * j["lower_bound_s"], "bound at half the NIC bandwidth")
        for args, code in ((["stats"], 2), (["stats", plan, "--bogus"], 2), (["stats", plan, "--nic-gbps", "x"], 2),
                           (["stats", os.path.join(d, "missing.bin")], 1)):
            rc = subprocess.run([reshardc] + args, capture_output=True).returncode
            if rc != code:
                fail(f"reshardc {' '.join(args)}: exit {rc}, want {code}")
        for opt, val in (("--nic-gbps", "0"), ("--nvlink-gbps", "0"), ("--bucket-bytes", "0"), ("--gb-roots", "17")):
            r = subprocess.run([reshardc, "stats", plan, opt, val], capture_output=True, text=True)
            if r.returncode != 2 or opt not in r.stderr:
                fail(f"reshardc stats {opt} {val}: exit {r.returncode}, {r.stderr!r} (the option must be named)")
        missing = os.path.join(d, "missing.bin")
        r = subprocess.run([reshardc, "stats", missing], capture_output=True, text=True)
        if r.stderr.count(missing) != 1:
            fail(f"reshardc stats {missing}: the path should be named once: {r.stderr!r}")
        # a report that cannot reach standard output (a full disk): said, exit 1 (it used to exit 0)
        if os.path.exists("/dev/full"):
            for args in (["stats", plan], ["stats", plan, "--json"], ["verify", plan], ["dump", plan]):
                with open("/dev/full", "w") as full:
                    r = subprocess.run([reshardc] + args, stdout=full, stderr=subprocess.PIPE, text=True)
                if r.returncode != 1 or "cannot write to standard output" not in r.stderr:
                    fail(f"reshardc {' '.join(args)} > /dev/full: exit {r.returncode}, {r.stderr!r}")
        # --svg naming the plan itself: refused, the plan intact
        with open(plan, "rb") as f:
            before = f.read()
        r = subprocess.run([reshardc, "stats", plan, "--svg", os.path.join(d, ".", "p.bin")], capture_output=True,
                           text=True)
        with open(plan, "rb") as f:
            if r.returncode != 2 or "would replace it" not in r.stderr or f.read() != before:
                fail(f"--svg onto the plan: exit {r.returncode}, {r.stderr!r}")
        # an SVG that cannot be written: the error names the file and the reason, and nothing is left behind
        # (a FIFO is written in place; a link keeps pointing at the file it names)
        bad = os.path.join(d, "missing", "p.svg")
        r = subprocess.run([reshardc, "stats", plan, "--svg", bad], capture_output=True, text=True)
        if r.returncode != 1 or bad + ": cannot create a temporary file next to it: No such file" not in r.stderr:
            fail(f"--svg into a missing directory: exit {r.returncode}, {r.stderr!r}")
        os.symlink("p.svg", os.path.join(d, "link.svg"))
        subprocess.run([reshardc, "stats", plan, "--svg", os.path.join(d, "link.svg")], check=True, capture_output=True)
        if not os.path.islink(os.path.join(d, "link.svg")):
            fail("--svg through a symbolic link replaced the link")
        ET.parse(os.path.join(d, "link.svg"))
        left = sorted(f for f in os.listdir(d) if ".tmp." in f)
        if left:
            fail(f"temporary files left behind: {left}")
    print("ok")


if __name__ == "__main__":
    main()
