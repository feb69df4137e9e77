# toy_refit.py - the worked example of docs/integration.md, runnable anywhere: a "Megatron" trainer (TP2, ranks
# 0-1) refits two "vLLM" engines (TP1, ranks 2-3) through reshard's CPU transport, each rank a thread, weights
# numpy arrays named as the frameworks name them. Every inference weight is checked after every refit.
# With --cuda: the same refits with torch bf16 tensors on the visible GPUs (rank r on GPU r % count), through
# the in-process CUDA transport.
# runs-on: cpu
import os
import shutil
import subprocess
import sys
import tempfile

CUDA = "--cuda" in sys.argv[1:]
try:
    import numpy as np
    if CUDA:
        import torch
except ImportError as e:  # exit status 77: the test suite counts the example as skipped
    print("skipped: %s" % e)
    sys.exit(77)

import reshard

if CUDA and not (torch.cuda.is_available() and reshard.transport_available("cuda")):
    print("skipped: --cuda needs a GPU and a libreshard built with CUDA")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))


def find_reshardc():
    for p in (os.environ.get("RESHARDC"), shutil.which("reshardc"),
              os.path.join(HERE, "..", "..", "build", "compiler", "reshardc")):
        if p and os.path.exists(p):
            return p
    sys.exit("reshardc not found: set RESHARDC")


# 1. Job setup: compile the layout once (every rank then reads its own part of the same plan.bin).
plan_path = os.path.join(tempfile.mkdtemp(), "toy.plan")
subprocess.run([find_reshardc(), os.path.join(HERE, "toy.layout"), "-o", plan_path], check=True)

# 2. The model. A checkpoint in Hugging Face's names; Megatron's TP2 shards of it (what each training rank's
#    model.named_parameters() yields, wrapped in DDP: "module."); vLLM's parameters (fused qkv_proj and
#    gate_up_proj), empty before the first refit. bf16 weights are uint16 bit patterns here.
L, H, NQ, NKV, HD, I, V, TP = 2, 16, 4, 2, 4, 24, 64, 2
QPG = NQ // NKV
rng = np.random.default_rng(0)


def w(*shape):
    return rng.integers(0, 1 << 16, size=shape, dtype=np.uint16)


ckpt = {"embed": w(V, H), "norm": w(H), "lm_head": w(V, H)}
for l in range(L):
    ckpt.update({f"{l}.ln1": w(H), f"{l}.q": w(NQ * HD, H), f"{l}.k": w(NKV * HD, H), f"{l}.v": w(NKV * HD, H),
                 f"{l}.o": w(H, NQ * HD), f"{l}.ln2": w(H), f"{l}.gate": w(I, H), f"{l}.up": w(I, H),
                 f"{l}.down": w(H, I)})


def megatron_params(tp, ck):
    """Megatron-Core's parameters on tensor-parallel rank tp."""
    rows = lambda a: np.split(a, TP, axis=0)[tp]  # noqa: E731  (column-parallel: output rows)
    cols = lambda a: np.split(a, TP, axis=1)[tp]  # noqa: E731  (row-parallel: input columns)
    p = {"module.embedding.word_embeddings.weight": rows(ck["embed"]),
         "module.decoder.final_layernorm.weight": ck["norm"], "module.output_layer.weight": rows(ck["lm_head"])}
    for l in range(L):
        groups = range(tp * NKV // TP, (tp + 1) * NKV // TP)  # this rank's kv groups: [q heads | k | v] each
        qkv = np.concatenate([np.concatenate([ck[f"{l}.q"][g * QPG * HD:(g + 1) * QPG * HD],
                                              ck[f"{l}.k"][g * HD:(g + 1) * HD], ck[f"{l}.v"][g * HD:(g + 1) * HD]])
                              for g in groups])
        pre = f"module.decoder.layers.{l}."
        p.update({pre + "self_attention.linear_qkv.layer_norm_weight": ck[f"{l}.ln1"],
                  pre + "self_attention.linear_qkv.weight": qkv,
                  pre + "self_attention.linear_proj.weight": cols(ck[f"{l}.o"]),
                  pre + "mlp.linear_fc1.layer_norm_weight": ck[f"{l}.ln2"],
                  pre + "mlp.linear_fc1.weight": np.concatenate([rows(ck[f"{l}.gate"]), rows(ck[f"{l}.up"])]),
                  pre + "mlp.linear_fc2.weight": cols(ck[f"{l}.down"])})
    return {k: np.array(v, order="C") for k, v in p.items()}  # copies: every rank owns its memory


def vllm_params(ck):
    """vLLM's parameters of one TP1 engine holding checkpoint ck."""
    p = {"model.embed_tokens.weight": ck["embed"], "model.norm.weight": ck["norm"], "lm_head.weight": ck["lm_head"]}
    for l in range(L):
        pre = f"model.layers.{l}."
        p.update({pre + "input_layernorm.weight": ck[f"{l}.ln1"],
                  pre + "self_attn.qkv_proj.weight": np.concatenate([ck[f"{l}.q"], ck[f"{l}.k"], ck[f"{l}.v"]]),
                  pre + "self_attn.o_proj.weight": ck[f"{l}.o"],
                  pre + "post_attention_layernorm.weight": ck[f"{l}.ln2"],
                  pre + "mlp.gate_up_proj.weight": np.concatenate([ck[f"{l}.gate"], ck[f"{l}.up"]]),
                  pre + "mlp.down_proj.weight": ck[f"{l}.down"]})
    return {k: np.array(v, order="C") for k, v in p.items()}  # copies: every rank owns its memory


def megatron_name(name):
    """Megatron's parameter name -> the layout's `as "..."` name: drop the DDP wrapper's "module." prefix."""
    return name[len("module."):] if name.startswith("module.") else name


def on_rank(rank, params):
    """A rank's parameters where that rank keeps them: the numpy arrays, or (--cuda) bf16 tensors on its GPU."""
    if not CUDA:
        return params
    dev = torch.device("cuda", rank % torch.cuda.device_count())
    return {k: torch.from_numpy(v.view(np.int16)).view(torch.bfloat16).to(dev) for k, v in params.items()}


def bits(t):
    """A parameter's bf16 bit patterns as a numpy uint16 array."""
    return t.view(torch.int16).cpu().numpy().view(np.uint16) if CUDA else t


# 3. Every rank: load its own rank of the plan, bind its parameters once, run at every refit.
WORLD = 4
models = [on_rank(0, megatron_params(0, ckpt)), on_rank(1, megatron_params(1, ckpt)),
          on_rank(2, {k: np.zeros_like(v) for k, v in vllm_params(ckpt).items()}),
          on_rank(3, {k: np.zeros_like(v) for k, v in vllm_params(ckpt).items()})]
group = reshard.LocalGroup(WORLD, transport="cuda" if CUDA else "cpu", timeout_ms=30000)
REFITS = 3


def rank_main(rank):
    plan = reshard.Plan(plan_path, rank)
    with group.executor(plan, rank) as x:
        if rank < TP:  # trainer: every parameter is a source
            x.bind_all(reshard.named_tensors(models[rank].items(), rename=megatron_name), side="source")
        else:          # inference engine: every parameter is a destination
            x.bind_all(reshard.named_tensors(models[rank].items()), side="destination")
        for step in range(REFITS):
            if rank < TP and step > 0:
                for t in models[rank].values():  # "optimizer step": the weights change in place
                    if CUDA:
                        t.view(torch.int16).add_(1)
                    else:
                        t += 1
                if CUDA:
                    torch.cuda.synchronize()  # the group runs on its own streams: the step must be done
            x.run()
            x.synchronize()
            if rank >= TP:
                want = vllm_params({k: v + step for k, v in ckpt.items()})
                for name, t in models[rank].items():
                    assert np.array_equal(bits(t), want[name]), f"rank {rank} refit {step}: {name} differs"
        return x.stats()


stats = reshard.run_threads(WORLD, rank_main)
group.close()
moved = sum(s.destination_bytes for s in stats)
print(f"{REFITS} refits of {len(models[2])} vLLM parameters on 2 engines{' (CUDA)' if CUDA else ''}: {moved} bytes "
      f"per refit, all equal to the checkpoint")
print("OK")
