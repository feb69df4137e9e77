# test_vllm_worker.py - python/examples/vllm_worker.py (the integration guide's vLLM worker extension), run
# here without torch, vLLM or a GPU: stub modules stand in for them. Checks what the example decides itself:
# the refit rank of a worker (first_rank + pp_rank * TP + tp_rank, the layouts' infer [dp, pp, tp]) and which
# drafter parameters it binds (the MTP layer's own, not the embedding and head it shares with the target).
import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python", "examples"))

torch = types.ModuleType("torch")
torch.cuda = types.SimpleNamespace(current_stream=lambda: "stream")
sys.modules["torch"] = torch
dist = types.ModuleType("vllm.distributed")
sys.modules["vllm"] = types.ModuleType("vllm")
sys.modules["vllm.distributed"] = dist

import reshard  # noqa: E402
import vllm_worker  # noqa: E402


class T:
    """A parameter: only its address matters to drafter_parameters."""

    def __init__(self, ptr):
        self.ptr = ptr

    def data_ptr(self):
        return self.ptr


class Model:
    def __init__(self, named):
        self.named = named

    def named_parameters(self):
        return iter(self.named)


failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


# --- drafter_parameters
embed, head = T(1), T(2)
target = {"model.embed_tokens.weight": embed, "lm_head.weight": head, "model.layers.60.input_layernorm.weight": T(3)}
drafter = Model([("model.embed_tokens.weight", embed),                 # shared with the target at load
                 ("model.layers.61.shared_head.head.weight", head),   # the target's lm_head
                 ("model.layers.61.enorm.weight", T(10)),
                 ("model.layers.61.mtp_block.mlp.experts.w13_weight", T(11))])
runner = types.SimpleNamespace(model=Model(list(target.items())), drafter=types.SimpleNamespace(model=drafter))
got = vllm_worker.drafter_parameters(runner, target)
check(sorted(got) == ["model.layers.61.enorm.weight", "model.layers.61.mtp_block.mlp.experts.w13_weight"],
      "drafter parameters: %s" % sorted(got))
check(vllm_worker.drafter_parameters(types.SimpleNamespace(), target) == {}, "no drafter: nothing")
check(vllm_worker.drafter_parameters(types.SimpleNamespace(drafter=types.SimpleNamespace()), target) == {},
      "a drafter without a model (n-gram): nothing")

# --- reshard_init: the refit rank and what is bound (Plan and Executor stubbed)
made = {}


class FakePlan:
    def __init__(self, path, rank):
        made["rank"] = rank


class FakeExec:
    @staticmethod
    def nccl_from_id(plan, uid, world, rank, stream=None, timeout_ms=None):
        made["exec_rank"] = rank
        return FakeExec()

    def bind_all(self, params, side=None):
        made["bound"] = sorted(params)
        return types.SimpleNamespace(pairs=list(params))


reshard.Plan, reshard.Executor = FakePlan, types.SimpleNamespace(nccl_from_id=FakeExec.nccl_from_id)
for pp, tp, want in ((0, 0, 100), (0, 3, 103), (1, 0, 104), (1, 3, 107)):  # TP4 x PP2 engine from rank 100
    dist.get_tensor_model_parallel_rank = lambda tp=tp: tp
    dist.get_tensor_model_parallel_world_size = lambda: 4
    dist.get_pp_group = lambda pp=pp: types.SimpleNamespace(rank_in_group=pp)
    w = vllm_worker.ReshardWorkerExtension()
    w.model_runner = runner
    n = w.reshard_init("plan.bin", b"id", 200, 100)
    check(made["rank"] == want and made["exec_rank"] == want, "pp %d tp %d: rank %s, want %d" % (pp, tp, made, want))
    check(n == 5 and "model.layers.61.enorm.weight" in made["bound"] and "lm_head.weight" in made["bound"],
          "bound: %s" % made["bound"])

for f in failures:
    print("test_vllm_worker: FAIL:", f)
print("test_vllm_worker: %s" % ("FAILED" if failures else "ok"))
sys.exit(1 if failures else 0)
