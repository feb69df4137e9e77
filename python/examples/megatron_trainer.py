# megatron_trainer.py - reshard in a Megatron-Core trainer (one process per GPU, NCCL): load this rank's part of
# the plan at startup, bind the model's parameters once, run after every optimizer step that ends in a refit.
# runs-on: gpu (compiled, not run, by the tests)
import torch
import torch.distributed as dist

import reshard


def megatron_name(name):
    """Megatron's parameter name -> the layout's `as "..."` name. DDP and Float16Module wrap the model, so
    named_parameters() says "module.module.decoder.layers.0...": drop the wrappers."""
    while name.startswith("module."):
        name = name[len("module."):]
    return name


def share_unique_id():
    """Rank 0 of the trainer makes the refit communicator's id; every trainer rank gets it. The RL controller
    hands the same bytes to the inference workers (they are plain bytes: pickle them, put them in Ray, ...)."""
    box = [reshard.nccl_unique_id() if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


class TrainerRefit:
    """One per training rank. Refit ranks 0..NT-1 are the trainer's global ranks (the layout's train meshes);
    the inference workers are ranks NT.. of the same refit world."""

    def __init__(self, model_chunks, plan_path, unique_id, refit_world_size):
        rank = dist.get_rank()
        self.plan = reshard.Plan(plan_path, rank)  # reads and verifies this rank's program only
        params = {}
        for i, chunk in enumerate(model_chunks):  # several chunks with virtual pipeline parallelism
            prefix = "vp%d." % i if len(model_chunks) > 1 else ""  # then name them so in the layout too
            params.update(reshard.named_tensors(chunk.named_parameters(),
                                                rename=lambda n, p=prefix: p + megatron_name(n)))
        # Collective over the whole refit world (trainers and inference workers), bounded by timeout_ms.
        self.exec = reshard.Executor.nccl_from_id(self.plan, unique_id, refit_world_size, rank,
                                                  stream=torch.cuda.current_stream(), timeout_ms=600_000)
        # Every parameter this rank holds a piece of, checked by name, size and dtype before anything is bound.
        self.exec.bind_all(params, side="source")

    def refit(self):
        """Call after optimizer.step() (and after the distributed optimizer has gathered the updated bf16
        parameters). Queued on the current stream behind the update; the next forward pass queued on it starts
        after the sends, so training continues without a host synchronization."""
        self.exec.run(torch.cuda.current_stream())

    def close(self):
        self.exec.close()
        self.plan.close()
