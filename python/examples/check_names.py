# check_names.py - before a job: check that a framework's parameter names, renamed, are exactly the buffers the
# plan expects on a rank (no GPU, no communicator): missing, unknown and wrong-sized tensors, closest names.
# runs-on: cpu
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

import reshard

HERE = os.path.dirname(os.path.abspath(__file__))
reshardc = os.environ.get("RESHARDC") or shutil.which("reshardc") or os.path.join(HERE, "../../build/compiler/reshardc")
plan_path = os.path.join(tempfile.mkdtemp(), "toy.plan")
subprocess.run([reshardc, os.path.join(HERE, "toy.layout"), "-o", plan_path], check=True, stdout=subprocess.DEVNULL)

plan = reshard.Plan(plan_path, 2)  # rank 2: the first vLLM engine
for b in plan.buffers()[:3]:
    print(b)  # "model.embed_tokens.weight" (destination bf16 [64, 16], 2048 bytes) ...

# A model whose names are almost right: one typo, one parameter the layout does not cover, one wrong shape.
params = {b.name: np.zeros(b.shape, b.numpy_dtype) for b in plan.buffers()}
params["model.layers.0.self_attn.qkv.weight"] = params.pop("model.layers.0.self_attn.qkv_proj.weight")
params["model.layers.0.self_attn.rotary_emb.inv_freq"] = np.zeros(2, np.float32)
params["lm_head.weight"] = np.zeros((32, 16), np.uint16)

m = plan.match(params, side="destination")
print(m.report())
assert not m.ok and [b.name for b in m.missing] == ["model.layers.0.self_attn.qkv_proj.weight"]
assert m.unknown == ["model.layers.0.self_attn.qkv.weight", "model.layers.0.self_attn.rotary_emb.inv_freq"]
assert [b.name for b, _ in m.wrong] == ["lm_head.weight"]
print("OK")
