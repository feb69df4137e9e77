# vllm_worker.py - reshard in vLLM's GPU workers, through a worker extension: every worker of every engine binds
# its model's parameters once and receives the new weights at every refit.
# runs-on: gpu (compiled, not run, by the tests)
import torch

import reshard


class ReshardWorkerExtension:
    """Mixed into each vLLM worker: LLM(..., worker_extension_cls="vllm_worker.ReshardWorkerExtension").
    Methods are called on every worker with llm.collective_rpc(name, args=...)."""

    def reshard_init(self, plan_path, unique_id, refit_world_size, first_rank):
        """first_rank: this engine's first refit rank (NT + engine index * PP * TP in the example layouts); a
        worker's refit rank adds pp_rank * TP + tp_rank, vLLM's own order (the layouts' infer [dp, pp, tp])."""
        from vllm.distributed import (get_pp_group, get_tensor_model_parallel_rank,
                                      get_tensor_model_parallel_world_size)
        rank = (first_rank + get_pp_group().rank_in_group * get_tensor_model_parallel_world_size()
                + get_tensor_model_parallel_rank())
        model = self.model_runner.model
        self.reshard_plan = reshard.Plan(plan_path, rank)
        self.reshard_exec = reshard.Executor.nccl_from_id(self.reshard_plan, unique_id, refit_world_size, rank,
                                                          stream=torch.cuda.current_stream(), timeout_ms=600_000)
        # vLLM's own names (fused qkv_proj, gate_up_proj, stacked experts): the layout's dst names.
        params = reshard.named_tensors(model.named_parameters())
        params.update(drafter_parameters(self.model_runner, params))
        m = self.reshard_exec.bind_all(params, side="destination")
        return len(m.pairs)

    def reshard_refit(self):
        """Receive the new weights. synchronize() returns when this worker's part is written (or raises:
        then the weights are not updated; fall back to a full reload)."""
        self.reshard_exec.run(torch.cuda.current_stream())
        self.reshard_exec.synchronize()
        return self.reshard_exec.stats().runs_completed


def drafter_parameters(model_runner, target_params):
    """With speculative decoding through the model's own MTP layers (DeepSeek-V3, a layout compiled with
    -D MTP=1), vLLM runs them as a second model, the drafter, whose parameters (`model.layers.61...`) the refit
    fills too. The drafter shares its embedding and output head with the target model: those tensors are
    bound once, under the target's names."""
    drafter = getattr(getattr(model_runner, "drafter", None), "model", None)
    if drafter is None:
        return {}
    shared = {t.data_ptr() for t in target_params.values()}
    return {n: t for n, t in reshard.named_tensors(drafter.named_parameters()).items() if t.data_ptr() not in shared}


def refit_engine(llm):
    """The driver side, at every refit (after the trainer's refit() was called for the same step)."""
    llm.collective_rpc("reshard_refit")
    llm.reset_prefix_cache()  # cached KV blocks were computed with the old weights
