# test_reshard.py - the Python package (python/reshard) on the CPU threads transport, with numpy: loading,
# buffer lists, binding (numpy, torch-like objects, raw pointers, buffers), replay with every destination element
# checked against numpy, re-binding, binding errors, run-time errors, names helpers, handle conversions.
# Environment: RESHARD_LIBRARY (libreshard.so), RESHARDC (reshardc), RS_TEST_TMP (scratch directory).
# Exit 77 (skipped) when numpy is not installed.
import ctypes
import os
import subprocess
import sys
import tempfile
import threading
import unittest

try:
    import numpy as np
except ImportError:
    print("numpy is not installed for %s: skipped (apt-get install python3-numpy)" % sys.executable)
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
import reshard  # noqa: E402

TIMEOUT_MS = 20000
TMP = None
PLANS = {}


def setUpModule():
    global TMP
    base = os.environ.get("RS_TEST_TMP")
    if base:
        os.makedirs(base, exist_ok=True)
    TMP = tempfile.mkdtemp(prefix="pytest-", dir=base)
    reshardc = os.environ.get("RESHARDC", os.path.join(ROOT, "build", "compiler", "reshardc"))
    for name, layout in (("tiny", "tests/consumer/tiny.layout"), ("mixed", "tests/python/mixed.layout"),
                         ("colocated", "tests/python/colocated.layout"), ("experts", "tests/python/experts.layout"),
                         ("balanced", "tests/golden/experts_balanced.layout"),
                         ("stacked", "tests/golden/experts_stacked.layout")):
        out = os.path.join(TMP, name + ".plan")
        subprocess.run([reshardc, os.path.join(ROOT, layout), "-o", out], check=True, stdout=subprocess.DEVNULL)
        PLANS[name] = out


def replay(plan_path, arrays, nranks, timeout_ms=TIMEOUT_MS, side=None):
    """Every rank on a thread: load its own rank, bind arrays[rank] (name -> array), run, synchronize."""
    group = reshard.LocalGroup(nranks, timeout_ms=timeout_ms)
    try:
        def main(rank):
            plan = reshard.Plan(plan_path, rank)
            with group.executor(plan, rank) as x:
                x.bind_all(arrays[rank], side=side)
                x.run()
                x.synchronize()
                return x.stats()
        return reshard.run_threads(nranks, main)
    finally:
        group.close()


# ---- the mixed plan's data, computed with numpy --------------------------------------------------------
A = np.arange(60, dtype=np.float32).reshape(6, 10) * 0.5 + 1
Q = (np.arange(32, dtype=np.uint16) * 7 + 3).reshape(4, 8)      # bf16 bit patterns
K = (np.arange(16, dtype=np.uint16) * 11 + 1000).reshape(2, 8)
E = np.array([10, -20, 30, -40, 2 ** 40], dtype=np.int64)


def mixed_sources():
    return [
        {"a": A[0:2].copy(), "q": Q.copy(), "e": E[0:2].copy()},
        {"a": A[2:4].copy(), "k": K.copy(), "e": E[2:4].copy()},
        {"a": A[4:6].copy(), "e": E[4:5].copy()},
    ]


def mixed_destinations(fill=0):
    out = []
    for dp in range(2):
        for tp in range(2):
            d = {"a": np.full((6, 5), fill, np.float32), "qk": np.full((6, 4), fill, np.uint16)}
            if dp == 1:
                d["e"] = np.full(5, fill, np.int64)
            out.append(d)
    return out


def check_mixed(test, dsts):
    for i, d in enumerate(dsts):
        dp, tp = divmod(i, 2)
        np.testing.assert_array_equal(d["a"], A[:, 5 * tp:5 * tp + 5], "rank %d a" % (3 + i))
        np.testing.assert_array_equal(d["qk"][0:4], Q[:, 4 * tp:4 * tp + 4], "rank %d qk[q]" % (3 + i))
        np.testing.assert_array_equal(d["qk"][4:6], K[:, 4 * tp:4 * tp + 4], "rank %d qk[k]" % (3 + i))
        if dp == 1:
            np.testing.assert_array_equal(d["e"], E, "rank %d e" % (3 + i))


def on_rank(rank, fn):
    """Run fn(executor) on rank ``rank`` of the tiny plan (CPU group of 4), the other ranks only creating their
    executors; returns what fn returned."""
    group = reshard.LocalGroup(4, timeout_ms=TIMEOUT_MS)
    plan = reshard.Plan(PLANS["tiny"])
    out = {}

    def main(r):
        with group.executor(plan, r) as x:
            if r == rank:
                out["result"] = fn(x)

    reshard.run_threads(4, main)
    group.close()
    return out.get("result")


class FakeTensor:
    """Quacks like a torch tensor (data_ptr, element_size, numel, is_contiguous, device, dtype, shape) over a
    numpy array, so the torch path is tested without torch."""

    class _Dev:
        def __init__(self, t):
            self.type = t

        def __str__(self):
            return self.type

    def __init__(self, arr, dtype, device="cpu", contiguous=True):
        self.arr, self.dtype, self.device, self._c = arr, dtype, FakeTensor._Dev(device), contiguous
        self.shape = arr.shape

    def data_ptr(self):
        return self.arr.ctypes.data

    def element_size(self):
        return self.arr.itemsize

    def numel(self):
        return self.arr.size

    def is_contiguous(self):
        return self._c


class PlanTests(unittest.TestCase):
    def test_info_and_buffers(self):
        p = reshard.Plan(PLANS["mixed"])
        self.assertEqual(p.world_size, 7)
        self.assertIsNone(p.rank)
        self.assertEqual(p.info.format_version, (1, 0))
        b = p.buffers(0)
        self.assertEqual([x.name for x in b], ["a", "q", "e"])
        self.assertEqual((b[0].side, b[0].dtype, b[0].shape, b[0].nbytes), ("source", "fp32", (2, 10), 80))
        self.assertEqual((b[1].dtype, b[1].numpy_dtype, b[1].itemsize), ("bf16", "uint16", 2))
        d = p.buffers(5)
        self.assertEqual([(x.name, x.side, x.shape, x.nbytes) for x in d],
                         [("a", "destination", (6, 5), 120), ("qk", "destination", (6, 4), 48),
                          ("e", "destination", (5,), 40)])
        self.assertEqual(len(p.buffers(3)), 2)
        self.assertGreaterEqual(p.staging_bytes(0), 0)
        with self.assertRaises(reshard.ReshardError) as cm:
            p.buffers()  # every rank loaded: which one?
        self.assertEqual(cm.exception.code, reshard.rsInvalidArgument)
        p.close()

    def test_balanced_experts(self):
        """vLLM's uneven expert split (format 1.2): 10 experts over 6 ranks as numpy.array_split gives them."""
        p = reshard.Plan(PLANS["balanced"])
        self.assertEqual(p.info.format_version, (1, 2))
        p.close()
        W = (np.arange(10 * 2 * 8 * 4, dtype=np.uint16) * 3 + 1).reshape(10, 2, 8, 4)   # bf16 bit patterns
        # training: mesh [ep = 2, tp = 2] on ranks 0..4, EP rank e's experts 5e..5e+5 as group members,
        # tp rank t rows 4t..4t+4 of dim 2; inference: view position k = dp * 3 + tp on rank [9, 5, 6, 7, 8, 4][k]
        train = [{"experts.fc1.%d" % j: W[5 * (r // 2) + j, :, 4 * (r % 2):4 * (r % 2) + 4].copy() for j in range(5)}
                 for r in range(4)]
        ranks = [9, 5, 6, 7, 8, 4]
        split = np.array_split(np.arange(10), 6)
        want = {ranks[k]: W[split[k]] for k in range(6)}
        infer = {r: {"experts.w13": np.zeros_like(want[r])} for r in ranks}
        replay(PLANS["balanced"], train + [infer[r] for r in range(4, 10)], 10)
        for r in ranks:
            np.testing.assert_array_equal(infer[r]["experts.w13"], want[r], err_msg="rank %d" % r)
        self.assertEqual([len(split[k]) for k in range(6)], [2, 2, 2, 2, 1, 1])

    def test_buffer_group_members(self):
        """A buffer group's members are listed, bound and filled one by one, each its own array, on either side."""
        p = reshard.Plan(PLANS["experts"])
        self.assertEqual(p.info.format_version, (1, 1))  # 1.0 without groups (test_info_and_buffers)
        self.assertEqual([(x.name, x.side, x.shape, x.nbytes) for x in p.buffers(1)],
                         [("experts.weight0", "source", (4, 5), 80), ("experts.weight1", "source", (4, 5), 80),
                          ("experts.bias0", "destination", (3,), 12), ("experts.bias1", "destination", (3,), 12)])
        p.close()
        w = np.arange(4 * 4 * 5, dtype=np.float32).reshape(4, 4, 5)
        b = np.arange(100, 112, dtype=np.float32).reshape(4, 3)
        train = [dict({"experts.weight%d" % j: w[2 * e + j].copy() for j in range(2)},
                      **{"experts.bias%d" % j: np.zeros(3, np.float32) for j in range(2)}) for e in range(2)]
        infer = [{"w13": np.zeros((4, 2, 5), np.float32), "b.stacked": b.copy()} for _ in range(2)]
        replay(PLANS["experts"], train + infer, 4)
        for t in range(2):
            np.testing.assert_array_equal(infer[t]["w13"], w[:, 2 * t:2 * t + 2, :])
        for e in range(2):
            for j in range(2):
                np.testing.assert_array_equal(train[e]["experts.bias%d" % j], b[2 * e + j])

    def test_buffer_group_two_member_dims(self):
        """A group of two member dims lists member (l, j) as the name with l and j (plus each marker's offset)
        in place of its two '{*}', l outer; a group over layers with an offset names layer l as l + 1."""
        p = reshard.Plan(PLANS["stacked"])
        self.assertEqual(p.info.format_version, (1, 3))
        fc1 = "decoder.layers.%d.mlp.experts.linear_fc1.weight%d"
        self.assertEqual([(x.name, x.shape, x.nbytes) for x in p.buffers(1)],
                         [(fc1 % (1, j), (2, 8, 4), 128) for j in range(4)] +
                         [("decoder.layers.1.pre_mlp_layernorm.weight", (4,), 8)])
        self.assertEqual([x.name for x in p.buffers(2)], [fc1 % (l, j) for l in range(2) for j in range(4)])
        self.assertEqual([(x.name, x.side, x.shape) for x in p.buffers(5)][:3],
                         [("model.layers.%d.mlp.experts.w13_weight" % (1 + l), "destination", (8, 2, 2, 4))
                          for l in range(3)])
        p.close()
        # every element through the named members: w13[l, e] on EP rank e // 4 of its stage is local expert
        # e % 4; stage 0 holds tensor layer 0 (its local layer 1), stage 1 tensor layers 1-2 (local 0-1)
        L_, E, F, H = 3, 8, 8, 4
        w = np.arange(L_ * E * 2 * F * H, dtype=np.float32).reshape(L_, E, 2, F, H).astype(np.uint16)
        ln = np.arange(H, dtype=np.uint16) + 7
        train = []
        for s in range(2):
            for e in range(2):
                mine = {(1, 0)} if s == 0 else {(0, 1), (1, 2)}  # (local layer, tensor layer)
                arrays = {fc1 % (ll, j): w[tl, 4 * e + j].copy() for ll, tl in mine for j in range(4)}
                if s == 0:
                    arrays["decoder.layers.1.pre_mlp_layernorm.weight"] = ln.copy()
                train.append(arrays)
        infer = [dict({"model.layers.%d.mlp.experts.w13_weight" % (l + 1): np.zeros((E, 2, 2, H), np.uint16)
                       for l in range(L_)}, **{"model.layers.1.post_attention_layernorm.weight":
                                                  np.zeros(H, np.uint16)}) for _ in range(4)]
        replay(PLANS["stacked"], train + infer, 8)
        for t in range(4):
            np.testing.assert_array_equal(infer[t]["model.layers.1.post_attention_layernorm.weight"], ln)
            for l in range(L_):
                np.testing.assert_array_equal(infer[t]["model.layers.%d.mlp.experts.w13_weight" % (l + 1)],
                                              w[l, :, :, 2 * t:2 * t + 2, :])

    def test_buffer_group_member_errors(self):
        """A member left unbound is named by run(); a destination member over another one is refused."""
        train = [dict({"experts.weight%d" % j: np.zeros((4, 5), np.float32) for j in range(2)},
                      **{"experts.bias%d" % j: np.zeros(3, np.float32) for j in range(2)}) for _ in range(2)]
        infer = [{"w13": np.zeros((4, 2, 5), np.float32), "b.stacked": np.ones((4, 3), np.float32)}
                 for _ in range(2)]
        arrays = train + infer
        group = reshard.LocalGroup(4, timeout_ms=TIMEOUT_MS)
        try:
            def main(rank):
                plan = reshard.Plan(PLANS["experts"], rank)
                with group.executor(plan, rank) as x:
                    x.bind_all(arrays[rank])
                    if rank == 0:
                        x.unbind("experts.bias1")
                        with self.assertRaises(reshard.ReshardError) as cm:
                            x.run()
                        self.assertIn("'experts.bias1'", str(cm.exception))
                        with self.assertRaises(reshard.ReshardError) as cm:
                            x.bind("experts.bias1", arrays[0]["experts.bias0"])
                        self.assertIn("overlaps", str(cm.exception))
                        x.bind("experts.bias1", arrays[0]["experts.bias1"])
                    x.run()
                    x.synchronize()
            reshard.run_threads(4, main)
        finally:
            group.close()
        for e in range(2):
            for j in range(2):
                np.testing.assert_array_equal(train[e]["experts.bias%d" % j], np.ones(3, np.float32))

    def test_per_rank_load(self):
        p = reshard.Plan(PLANS["mixed"], 4)
        self.assertEqual(p.rank, 4)
        self.assertEqual([x.name for x in p.buffers()], ["a", "qk"])
        with self.assertRaises(reshard.ReshardError) as cm:
            p.buffers(0)
        self.assertIn("not loaded", cm.exception.message)  # the library's message
        all_ranks = reshard.Plan(PLANS["mixed"])
        self.assertEqual(p.fingerprint, all_ranks.fingerprint)
        with open(PLANS["mixed"], "rb") as f:
            self.assertEqual(reshard.Plan(f.read(), 4).fingerprint, p.fingerprint)

    def test_bad_plans(self):
        with self.assertRaises(reshard.ReshardError) as cm:
            reshard.Plan(os.path.join(TMP, "nonexistent.plan"), 0)
        self.assertEqual(cm.exception.name, "rsPlanInvalid")
        self.assertIn("nonexistent.plan", str(cm.exception))
        with open(PLANS["tiny"], "rb") as f:
            data = bytearray(f.read())
        data[len(data) // 2] ^= 0xFF
        with self.assertRaises(reshard.ReshardError) as cm:
            reshard.Plan(bytes(data), 0)
        self.assertEqual(cm.exception.code, reshard.rsPlanInvalid)
        self.assertTrue(cm.exception.message)
        with self.assertRaises(reshard.ReshardError):
            reshard.Plan(PLANS["tiny"], 9)


class ReplayTests(unittest.TestCase):
    def test_tiny(self):
        full = np.arange(32, dtype=np.float32).reshape(8, 4)
        arrays = [{"w": full[0:4].copy()}, {"w": full[4:8].copy()}, {"w": np.zeros((8, 2), np.float32)},
                  {"w": np.zeros((8, 2), np.float32)}]
        stats = replay(PLANS["tiny"], arrays, 4)
        np.testing.assert_array_equal(arrays[2]["w"], full[:, 0:2])
        np.testing.assert_array_equal(arrays[3]["w"], full[:, 2:4])
        self.assertEqual(stats[2].destination_bytes, 64)
        self.assertEqual(stats[2].runs_completed, 1)
        self.assertEqual(sum(s.bytes_sent[0] + s.bytes_sent[1] for s in stats),
                         sum(s.bytes_received[0] + s.bytes_received[1] for s in stats))

    def test_mixed_every_element(self):
        src, dst = mixed_sources(), mixed_destinations(fill=0)
        before = [{k: v.copy() for k, v in s.items()} for s in src]
        replay(PLANS["mixed"], src + dst, 7)
        check_mixed(self, dst)
        for s, b in zip(src, before):  # sources are read-only
            for k in s:
                np.testing.assert_array_equal(s[k], b[k])

    def test_repeated_runs_and_rebinding(self):
        """run() is repeatable; after unbind + bind of new memory the next run fills the new arrays."""
        src, dst = mixed_sources(), mixed_destinations(fill=7)
        new_dst = mixed_destinations(fill=9)
        group = reshard.LocalGroup(7, timeout_ms=TIMEOUT_MS)
        plan = reshard.Plan(PLANS["mixed"])

        def main(rank):
            with group.executor(plan, rank) as x:
                for b in x.buffers:
                    x.bind(b.name, (src + dst)[rank][b.name])
                self.assertEqual(x.unbound, [])
                for _ in range(3):
                    x.run()
                    x.synchronize()
                self.assertTrue(x.query())
                if rank >= 3:
                    for b in x.buffers:
                        x.unbind(b.name)
                    self.assertEqual(len(x.unbound), len(x.buffers))
                    x.bind_all(new_dst[rank - 3])
                x.run()
                x.synchronize()
                return x.stats().runs_completed

        self.assertEqual(reshard.run_threads(7, main), [4] * 7)
        group.close()
        check_mixed(self, dst)
        check_mixed(self, new_dst)

    def test_bind_kinds(self):
        """torch-like objects, raw pointers (int, (ptr, n), c_void_p) and a bytearray bind the memory they hold."""
        full = np.arange(32, dtype=np.float32).reshape(8, 4)
        s0, s1 = full[0:4].copy(), full[4:8].copy()
        raw = bytearray(s1.tobytes())
        d2, d3 = np.zeros((8, 2), np.float32), np.zeros((8, 2), np.float32)
        group = reshard.LocalGroup(4, timeout_ms=TIMEOUT_MS)
        plan = reshard.Plan(PLANS["tiny"])
        objs = [FakeTensor(s0, "torch.float32"), raw, (d2.ctypes.data, d2.nbytes), d3.ctypes.data]

        def main(rank):
            with group.executor(plan, rank) as x:
                if rank == 3:
                    x.bind("w", ctypes.c_void_p(objs[3]), nbytes=64)
                else:
                    x.bind(0, objs[rank])
                x.run()
                x.synchronize()

        reshard.run_threads(4, main)
        group.close()
        np.testing.assert_array_equal(d2, full[:, 0:2])
        np.testing.assert_array_equal(d3, full[:, 2:4])

    def test_colocated_sides(self):
        full = np.arange(48, dtype=np.int32).reshape(8, 6)
        srcs = [{"w": full[0:4].copy()}, {"w": full[4:8].copy()}]
        dsts = [{"w": np.zeros((8, 3), np.int32)}, {"w": np.zeros((8, 3), np.int32)}]
        group = reshard.LocalGroup(2, timeout_ms=TIMEOUT_MS)
        plan = reshard.Plan(PLANS["colocated"])

        def main(rank):
            with group.executor(plan, rank) as x:
                with self.assertRaises(reshard.ReshardError) as cm:
                    x.bind("w", srcs[rank]["w"])  # a source and a destination are both called "w"
                self.assertIn("both a source and a destination", cm.exception.message)
                with self.assertRaises(reshard.ReshardError) as cm:
                    x.bind_all({"w": srcs[rank]["w"]})
                self.assertIn('side="source"', str(cm.exception))
                x.bind_all(srcs[rank], side="source")
                x.bind("w", dsts[rank]["w"], side="destination")
                x.run()
                x.synchronize()

        reshard.run_threads(2, main)
        group.close()
        for r in range(2):
            np.testing.assert_array_equal(dsts[r]["w"], full[:, 3 * r:3 * r + 3])


class BindingErrorTests(unittest.TestCase):
    """Each binding error raises at the call, with a message; the executor stays usable afterwards."""

    def setUp(self):
        self.plan = reshard.Plan(PLANS["mixed"], 5)

    @staticmethod
    def errors_on(rank, fn):
        return on_rank(rank, fn)

    def test_library_errors(self):
        def fn(x):
            errs = []
            for args, kw in ((("w", np.zeros(15, np.float32)), {}),      # wrong size
                             (("nope", np.zeros(16, np.float32)), {}),   # unknown name
                             ((5, np.zeros(16, np.float32)), {})):        # index out of range
                with self.assertRaises(reshard.ReshardError) as cm:
                    x.bind(*args, **kw)
                errs.append(cm.exception)
            with self.assertRaises(reshard.ReshardError) as cm:
                x.run()  # nothing bound
            errs.append(cm.exception)
            good = np.zeros((8, 2), np.float32)
            x.bind("w", good)
            with self.assertRaises(reshard.ReshardError) as cm:
                x.bind("w", good)  # already bound
            errs.append(cm.exception)
            x.unbind("w")
            with self.assertRaises(reshard.ReshardError) as cm:
                x.unbind("w")  # not bound
            errs.append(cm.exception)
            return errs

        e = self.errors_on(2, fn)
        self.assertEqual(e[0].code, reshard.rsBindingError)
        self.assertIn("64", e[0].message)  # the planned size, in the library's words
        self.assertIn("60", e[0].message)
        self.assertEqual(e[1].code, reshard.rsBindingError)
        self.assertIn("nope", e[1].message)
        self.assertEqual(e[2].code, reshard.rsInvalidArgument)
        self.assertEqual(e[3].code, reshard.rsInvalidUsage)
        self.assertIn("w", e[3].message)  # lists the unbound buffers
        self.assertEqual(e[4].code, reshard.rsBindingError)
        self.assertTrue(all(err.message for err in e))

    def test_python_side_errors(self):
        def fn(x):
            out = []
            ro = np.zeros((8, 2), np.float32)
            ro.setflags(write=False)
            for obj in (ro,                                           # read-only destination
                        np.zeros(8, np.float64),                      # right size, 8-byte elements for fp32
                        FakeTensor(np.zeros(16, np.int32), "torch.int32"),      # exact dtype mismatch
                        FakeTensor(np.zeros(16, np.float32), "torch.float32", device="cuda"),  # device
                        FakeTensor(np.zeros(16, np.float32), "torch.float32", contiguous=False),
                        np.zeros((8, 4), np.float32)[:, ::2]):         # non-contiguous view
                with self.assertRaises(reshard.ReshardError) as cm:
                    x.bind("w", obj)
                out.append(str(cm.exception))
            with self.assertRaises(TypeError):
                x.bind("w", 12345)  # a raw pointer needs nbytes
            with self.assertRaises(TypeError):
                x.bind("w", object())
            x.bind("w", FakeTensor(np.zeros(16, np.int32), "torch.int32"), check_dtype=False)
            self.assertEqual(x.unbound, [])
            return out

        msgs = self.errors_on(3, fn)
        self.assertIn("read-only", msgs[0])
        self.assertIn("4-byte elements", msgs[1])
        self.assertIn("fp32", msgs[2])
        self.assertIn("cuda", msgs[3])
        self.assertIn("not contiguous", msgs[4])
        self.assertIn("not contiguous", msgs[5])

    def test_bind_all_report(self):
        """bind_all checks the whole map first: missing, unknown (with the closest names), wrong size."""
        good = {"a": np.zeros((6, 5), np.float32), "qk": np.zeros((6, 4), np.uint16), "e": np.zeros(5, np.int64)}
        self.assertTrue(self.plan.match(good).ok)
        bad = {"a": np.zeros((6, 4), np.float32), "q_k": good["qk"], "e": good["e"], "extra.bias": good["e"]}
        m = self.plan.match(bad)
        self.assertFalse(m.ok)
        self.assertEqual([b.name for b in m.missing], ["qk"])
        self.assertEqual(m.unknown, ["extra.bias", "q_k"])
        self.assertEqual([b.name for b, _ in m.wrong], ["a"])
        text = m.report()
        self.assertIn('missing "qk"', text)
        self.assertIn('closest unbound name given: "q_k"', text)
        self.assertIn('unknown "extra.bias"', text)
        self.assertIn("120 bytes", text)
        with self.assertRaises(reshard.ReshardError) as cm:
            m.raise_if_bad()
        self.assertEqual(cm.exception.code, reshard.rsBindingError)
        self.assertEqual(cm.exception.missing, ["qk"])
        self.assertEqual(cm.exception.unknown, ["extra.bias", "q_k"])
        # on an executor: nothing is bound when the map is bad; allow_unknown ignores extra names
        def fn(x):
            with self.assertRaises(reshard.ReshardError):
                x.bind_all({"w": np.zeros((8, 2), np.float32), "bias": np.zeros(2, np.float32)})
            self.assertEqual(len(x.unbound), 1)
            x.bind_all({"w": np.zeros((8, 2), np.float32), "bias": np.zeros(2, np.float32)}, allow_unknown=True)
            return x.unbound

        self.assertEqual(self.errors_on(2, fn), [])

    def test_side_filter(self):
        m = reshard.Plan(PLANS["mixed"], 0).match({"a": np.zeros((2, 10), np.float32)}, side="destination")
        self.assertEqual(m.unknown, ["a"])  # rank 0's "a" is a source


class FailureTests(unittest.TestCase):
    def test_rank_that_never_runs_times_out(self):
        """Rank 3 of the tiny plan creates its executor but never runs: the others fail with the library's
        timeout naming it (bounded by timeout_ms), reported through RankError with the rank."""
        full = np.arange(32, dtype=np.float32).reshape(8, 4)
        arrays = [{"w": full[0:4].copy()}, {"w": full[4:8].copy()}, {"w": np.zeros((8, 2), np.float32)},
                  {"w": np.zeros((8, 2), np.float32)}]
        group = reshard.LocalGroup(4, timeout_ms=1500)
        plan = reshard.Plan(PLANS["tiny"])
        done = threading.Semaphore(0)

        def main(rank):
            with group.executor(plan, rank) as x:
                x.bind_all(arrays[rank])
                if rank == 3:  # stays, without running, until the others have given up
                    for _ in range(3):
                        done.acquire(timeout=60)
                    return
                try:
                    x.run()
                    x.synchronize()
                finally:
                    done.release()

        with self.assertRaises(reshard.RankError) as cm:
            reshard.run_threads(4, main)
        group.close()
        errs = cm.exception.errors
        self.assertNotIn(3, errs)
        for r, e in errs.items():
            self.assertIsInstance(e, reshard.ReshardError)
            self.assertIn(e.code, (reshard.rsTimeout, reshard.rsRemoteError), str(e))
        self.assertTrue(any(e.code == reshard.rsTimeout and "3" in e.message for e in errs.values()))

    def test_fingerprint_mismatch(self):
        """Ranks loading different plans fail at creation on every rank (rsMismatch), not a hang."""
        group = reshard.LocalGroup(2, timeout_ms=TIMEOUT_MS)
        with open(PLANS["colocated"], "rb") as f:
            data = f.read()
        other = os.path.join(TMP, "colocated-b.plan")
        subprocess.run([os.environ.get("RESHARDC", os.path.join(ROOT, "build", "compiler", "reshardc")),
                        os.path.join(ROOT, "tests/python/colocated.layout"), "-o", other, "--staging", "4096"],
                       check=True, stdout=subprocess.DEVNULL)
        plans = [reshard.Plan(data, 0), reshard.Plan(other, 1)]
        if plans[0].fingerprint == plans[1].fingerprint:
            self.skipTest("--staging does not change this plan")

        def main(rank):
            group.executor(plans[rank], rank)

        with self.assertRaises(reshard.RankError) as cm:
            reshard.run_threads(2, main)
        group.close()
        self.assertEqual(sorted(cm.exception.errors), [0, 1])
        for e in cm.exception.errors.values():
            self.assertEqual(e.code, reshard.rsMismatch)

    def test_abort_from_another_thread(self):
        group = reshard.LocalGroup(4, timeout_ms=TIMEOUT_MS)
        plan = reshard.Plan(PLANS["tiny"])
        arrays = [np.zeros((4, 4), np.float32), np.zeros((4, 4), np.float32), np.zeros((8, 2), np.float32),
                  np.zeros((8, 2), np.float32)]

        def main(rank):
            with group.executor(plan, rank) as x:
                x.bind("w", arrays[rank])
                if rank == 0:
                    x.abort()
                else:
                    x.run()
                    x.synchronize()

        with self.assertRaises(reshard.RankError) as cm:
            reshard.run_threads(4, main)
        group.close()
        self.assertTrue(all(e.code in (reshard.rsAborted, reshard.rsRemoteError, reshard.rsInvalidUsage)
                            for e in cm.exception.errors.values()), cm.exception.errors)


class HelperTests(unittest.TestCase):
    def test_named_tensors(self):
        params = [("module.decoder.layers.0.mlp.linear_fc1.weight", 1), ("module.decoder.layers.0.mlp.bias", 2),
                  ("module.output_layer.weight", 3)]
        got = reshard.named_tensors(params, lambda n: None if n.endswith(".bias") else n, prefix="module.")
        self.assertEqual(got, {"decoder.layers.0.mlp.linear_fc1.weight": 1, "output_layer.weight": 3})
        rn = reshard.regex_rename([(r".*\.bias", None), (r"module\.(decoder\..*)", r"\1")])
        self.assertEqual(reshard.named_tensors(dict(params), rn), {"decoder.layers.0.mlp.linear_fc1.weight": 1})
        with self.assertRaises(ValueError) as cm:
            reshard.named_tensors(params, lambda n: "same")
        self.assertIn("module.decoder.layers.0.mlp.linear_fc1.weight", str(cm.exception))
        with self.assertRaises(TypeError):
            reshard.named_tensors(params, lambda n: 5)

    def test_handles(self):
        from reshard import _cuda

        class TorchStream:
            cuda_stream = 0x1234

        class PyNccl:
            comm = ctypes.c_void_p(0x99)

        self.assertEqual(_cuda.stream_handle(None), 0)
        self.assertEqual(_cuda.stream_handle(77), 77)
        self.assertEqual(_cuda.stream_handle(TorchStream()), 0x1234)
        self.assertEqual(_cuda.stream_handle(ctypes.c_void_p(5)), 5)
        with self.assertRaises(TypeError):
            _cuda.stream_handle("stream")
        self.assertEqual(_cuda.comm_handle(PyNccl()), 0x99)
        self.assertEqual(_cuda.comm_handle(42), 42)
        self.assertEqual(len(_cuda.unique_id_bytes(list(range(128)))), 128)
        with self.assertRaises(reshard.ReshardError):
            _cuda.unique_id_bytes(b"short")

    def test_stream_join_order(self):
        """run(stream=S) on an NCCL executor with stream E: record on S, E waits; run; record on E, S waits."""
        from reshard import _cuda
        calls = []

        class FakeDriver:
            def cuEventRecord(self, ev, stream):
                calls.append(("record", ev.value, stream))
                return 0

            def cuStreamWaitEvent(self, stream, ev, flags):
                calls.append(("wait", stream, ev.value))
                return 0

            def cuEventDestroy_v2(self, ev):
                calls.append(("destroy", ev.value))
                return 0

        j = _cuda.StreamJoin()
        j._cu, j._ev = FakeDriver(), [ctypes.c_void_p(1), ctypes.c_void_p(2)]
        j.before(0x5, 0xE)
        calls.append("run")
        j.after(0xE, 0x5)
        j.close()
        self.assertEqual(calls, [("record", 1, 0x5), ("wait", 0xE, 1), "run", ("record", 2, 0xE), ("wait", 0x5, 2),
                                 ("destroy", 1), ("destroy", 2)])

    def test_nccl_errors_are_reported(self):
        """On a machine without a GPU (or a library without NCCL) the NCCL constructors fail with the library's
        message; a NULL communicator is refused."""
        plan = reshard.Plan(PLANS["tiny"], 0)
        with self.assertRaises(reshard.ReshardError) as cm:
            reshard.Executor.nccl(plan, 0)
        self.assertEqual(cm.exception.code, reshard.rsInvalidArgument)
        if not reshard.transport_available("nccl"):
            with self.assertRaises(reshard.ReshardError) as cm:
                reshard.Executor.nccl_from_id(plan, bytes(128), 4, 0, timeout_ms=2000)
            self.assertIn(cm.exception.code, (reshard.rsNotSupported, reshard.rsTransportError))
            self.assertTrue(cm.exception.message)

    def test_bytes_source(self):
        """bytes bind as a (read-only) source; as a destination they are refused."""
        data = np.arange(16, dtype=np.float32).tobytes()
        self.assertEqual(on_rank(0, lambda x: x.bind("w", data).nbytes), 64)
        with self.assertRaises(reshard.RankError) as cm:
            on_rank(2, lambda x: x.bind("w", data))
        self.assertIn("read-only", str(cm.exception))

    def test_group_close_refused_while_in_use(self):
        group = reshard.LocalGroup(4, timeout_ms=TIMEOUT_MS)
        plan = reshard.Plan(PLANS["tiny"])
        execs = reshard.run_threads(4, lambda r: group.executor(plan, r))
        with self.assertRaises(reshard.ReshardError) as cm:
            group.close()
        self.assertIn("executors still use the group", cm.exception.message)
        for x in execs:
            x.close()
        group.close()  # now it works: the handle was kept

    def test_cpu_run_refuses_a_stream(self):
        def fn(x):
            with self.assertRaises(reshard.ReshardError):
                x.run(stream=0x10)
        on_rank(0, fn)

    def test_debug_logging(self):
        """RESHARD_DEBUG=INFO logs plan loading, executors, binding; TRACE every op (dump's printer); unset: quiet."""
        code = """if True:
            import numpy as np, reshard
            g = reshard.LocalGroup(4, timeout_ms=20000)
            p = reshard.Plan(%r)
            a = [np.zeros((4, 4), np.float32)] * 2 + [np.zeros((8, 2), np.float32) for _ in range(2)]
            def main(r):
                with g.executor(p, r) as x:
                    x.bind("w", a[r]); x.run(); x.synchronize()
            reshard.run_threads(4, main)
            g.close()
        """ % PLANS["tiny"]
        out = {}
        for level in ("", "INFO", "TRACE"):
            env = dict(os.environ, RESHARD_DEBUG=level)
            r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            out[level] = r.stderr
        self.assertEqual(out[""], "")
        self.assertIn("reshard INFO: plan loaded: world 4", out["INFO"])
        self.assertIn("reshard[2] INFO: all 1 buffers bound", out["INFO"])
        self.assertNotIn("TRACE", out["INFO"])
        self.assertIn("reshard[0] TRACE:", out["TRACE"])
        self.assertIn("SEND", out["TRACE"])

    def test_library_lookup(self):
        env = dict(os.environ, RESHARD_LIBRARY=os.path.join(TMP, "no-such-libreshard.so"))
        r = subprocess.run([sys.executable, "-c", "import reshard; reshard.library_path()"], env=env,
                           capture_output=True, text=True, cwd=os.path.join(ROOT, "python"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("RESHARD_LIBRARY", r.stderr)
        env.pop("RESHARD_LIBRARY")
        r = subprocess.run([sys.executable, "-c", "from reshard import _lib; print(_lib.candidates())"], env=env,
                           capture_output=True, text=True, cwd=os.path.join(ROOT, "python"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("'system'", r.stdout)
        self.assertEqual(reshard.library_version(), (0, 1, 0))


if __name__ == "__main__":
    unittest.main(verbosity=2)
