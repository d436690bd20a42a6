"""``engine=loop``: the readable reference backend, one client after the other.

One model object serves every client, its state loaded from the client's start state plus its
own local keys (no deep copies, no DataLoader); a client's batches for the round are gathered at
once from data that already lives on the device (``client_round_batches``). The model's
parameters are the algorithm's ``params`` tree: its hooks update them in place.
"""
from __future__ import annotations

import torch

from fedbn_bench.engine.backends.base import Backend, ClientJob, ClientResult
from fedbn_bench.engine.local_steps import run_local_steps
from fedbn_bench.engine.options import channels_last_input
from fedbn_bench.engine.sampling import client_round_batches, seed_global


class LoopBackend(Backend):
    def train(self, jobs: list[ClientJob], round_idx: int, lr: float) -> list[ClientResult]:
        return [self.train_client(job, round_idx, lr) for job in jobs]

    def train_client(self, job: ClientJob, round_idx: int, lr: float) -> ClientResult:
        ctx = self.ctx
        model, algo = ctx.model, ctx.algo
        self.load(job)
        x, y = client_round_batches(ctx.train.x, ctx.train.y, job.indices, ctx.batch_size, job.steps,
                                    (ctx.seed, round_idx, job.client), ctx.augment)
        pre_stats = self.pre_statistics(job)
        seed_global(ctx.seed, round_idx, job.client)
        model.train()
        params = {k: p.detach() for k, p in model.named_parameters()}
        local = algo.start(params, job.algo_state)
        trainable = [(k, p) for k, p in model.named_parameters() if p.requires_grad]

        def forward_backward(active, xb, yb, n):
            for _, p in trainable:
                p.grad = None
            loss = algo.loss(model(channels_last_input(xb) if ctx.channels_last else xb), yb)
            loss.backward()
            return {k: p.grad for k, p in trainable if p.grad is not None}, loss.detach()

        loss_sum = torch.zeros((), dtype=x.dtype, device=x.device)
        run_local_steps(algo, forward_backward, params, local, ((None, xb, yb) for xb, yb in zip(x, y)), lr, loss_sum)
        upload, extras, algo_state = algo.finish(params, local)
        stats = ctx.norm.client_statistics(model, len(job.indices)) if pre_stats is None else pre_stats
        state = model.state_dict()
        own = {k: state[k].detach().clone() for k in ctx.local_keys}
        return self.result(job, upload, extras, algo_state, stats, own, loss_sum / max(job.steps, 1))
