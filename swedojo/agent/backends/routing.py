"""Routing replay (R3) for transformers MoE models: record the experts each token was routed to, and
run a forward pass forced to recorded routes.

An MoE layer's router picks its top-k experts by comparing scores, so a score that differs in the
last bits between the rollout engine and the trainer (other kernels, other batch shapes, a weight
update) can pick another expert, and that token's logprob then moves by far more than float noise.
Replaying the rollout's routes in the training forward removes that source of mismatch: the trainer
still computes the routers' own probabilities for the chosen experts (so their gradients flow as
usual), only the choice is taken from the rollout.

Routes follow slime's `rollout_routed_experts`: an int array [num_tokens, num_layers, top_k], row t
the experts token t was routed to when it was fed to the model, one column block per decoder layer
(dense layers, which route nothing, hold -1). A sequence of n tokens has n - 1 rows: the last
sampled token is never fed. Within a row the experts keep the router's own order, so a forced
forward sums the experts in the order the rollout did.

Routers are found by class (`ROUTER_WEIGHTS`); each returns (router_logits, weights, indices) as
transformers 5.x MoE routers do.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn
from transformers.models.glm4_moe.modeling_glm4_moe import Glm4MoeTopkRouter
from transformers.models.glm_moe_dsa.modeling_glm_moe_dsa import GlmMoeDsaTopkRouter
from transformers.models.mixtral.modeling_mixtral import MixtralTopKRouter
from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeTopKRouter

from swedojo.agent.backends.base import BackendError

NO_EXPERT = -1
"""Route entry of a dense layer (no router), as slime pads."""

RouterOutput = tuple[torch.Tensor, torch.Tensor, torch.Tensor]
"""(router_logits, weights of the chosen experts, chosen expert ids), each per flattened token."""


class RoutingReplayError(BackendError):
    """Recorded routes do not fit the model or the tokens of a forced forward pass."""


def _softmax_weights(router: nn.Module, hidden: torch.Tensor, chosen: torch.Tensor) -> RouterOutput:
    """Qwen3-MoE / Mixtral: softmax over all experts, the chosen ones' probabilities, renormalised
    when the router does (Mixtral always; Qwen3-MoE with `norm_topk_prob`)."""
    logits = F.linear(hidden.reshape(-1, router.hidden_dim), router.weight)
    probs = torch.softmax(logits.float(), dim=-1)
    weights = probs.gather(1, chosen)
    if getattr(router, "norm_topk_prob", True):
        weights /= weights.sum(dim=-1, keepdim=True)
    if isinstance(router, Qwen3MoeTopKRouter):
        weights = weights.to(logits.dtype)
    return logits, weights, chosen


def _sigmoid_weights(router: nn.Module, hidden: torch.Tensor, chosen: torch.Tensor) -> RouterOutput:
    """GLM-4.5 / GLM-5: sigmoid scores; the selection bias (`e_score_correction_bias`) only chooses,
    so the weights are the chosen experts' plain scores, renormalised and scaled."""
    logits = F.linear(hidden.reshape(-1, router.hidden_dim).float(), router.weight.float())
    weights = logits.sigmoid().gather(1, chosen)
    if router.norm_topk_prob:
        weights /= weights.sum(dim=-1, keepdim=True) + 1e-20
    return logits, weights * router.routed_scaling_factor, chosen


ROUTER_WEIGHTS: dict[type[nn.Module], Callable[[nn.Module, torch.Tensor, torch.Tensor], RouterOutput]] = {
    Qwen3MoeTopKRouter: _softmax_weights,
    MixtralTopKRouter: _softmax_weights,
    Glm4MoeTopkRouter: _sigmoid_weights,
    GlmMoeDsaTopkRouter: _sigmoid_weights,
}
"""Router classes replay knows, and how each weighs experts it is told to use (as its own forward does)."""

_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")


def find_routers(model: nn.Module) -> dict[int, nn.Module]:
    """Decoder layer index -> that layer's router, for the router classes in `ROUTER_WEIGHTS`."""
    routers: dict[int, nn.Module] = {}
    for name, module in model.named_modules():
        if type(module) in ROUTER_WEIGHTS and (match := _LAYER.search(name)):
            routers[int(match.group(1))] = module
    return routers


def routing_shape(model: nn.Module) -> tuple[int, int]:
    """(num_layers, top_k) of a route row; (0, 0) for a model without known routers."""
    routers = find_routers(model)
    if not routers:
        return 0, 0
    return int(model.config.num_hidden_layers), next(iter(routers.values())).top_k


class RoutingRecorder:
    """Records the experts each token is routed to, per forward call, while `recording()` is open."""

    def __init__(self, model: nn.Module) -> None:
        self.routers = find_routers(model)
        self.num_layers, self.top_k = routing_shape(model)
        self._seen: dict[int, torch.Tensor] = {}

    @contextmanager
    def recording(self) -> Iterator[RoutingRecorder]:
        """Forward hooks on every router for the duration; `take()` returns what one forward routed."""
        handles = [router.register_forward_hook(self._hook(layer)) for layer, router in self.routers.items()]
        try:
            yield self
        finally:
            for handle in handles:
                handle.remove()
            self._seen.clear()

    def _hook(self, layer: int) -> Callable[[nn.Module, tuple, RouterOutput], None]:
        def hook(module: nn.Module, inputs: tuple, output: RouterOutput) -> None:
            self._seen[layer] = output[2].detach().to("cpu", torch.int32)

        return hook

    def take(self, tokens: int) -> torch.Tensor:
        """[tokens, num_layers, top_k] routes of the last forward over `tokens` tokens (batch 1)."""
        rows = torch.full((tokens, self.num_layers, self.top_k), NO_EXPERT, dtype=torch.int32)
        for layer, chosen in self._seen.items():
            rows[:, layer] = chosen.reshape(tokens, self.top_k)
        self._seen.clear()
        return rows


@contextmanager
def forced_routing(model: nn.Module, routes: torch.Tensor | Sequence) -> Iterator[None]:
    """Forward passes inside are routed as `routes` says instead of by the routers' own top-k.

    `routes` is [tokens, num_layers, top_k] (or [batch, tokens, num_layers, top_k]) in the order the
    model flattens its tokens (batch-major). Successive forward calls consume successive rows, so a
    chunked or cached forward replays as well as one pass over the whole sequence. Each router
    still computes its weights for the forced experts from its own parameters (`ROUTER_WEIGHTS`),
    so gradients reach it as in a free pass. RoutingReplayError when the rows run out or do not fit.
    """
    table = torch.as_tensor(routes, dtype=torch.long)
    if table.dim() == 4:
        table = table.reshape(-1, *table.shape[2:])
    routers = find_routers(model)
    num_layers, top_k = routing_shape(model)
    if table.dim() != 3 or tuple(table.shape[1:]) != (num_layers, top_k):
        raise RoutingReplayError(
            f"routes of shape {tuple(table.shape)} do not fit a model with {num_layers} layers routing top-{top_k}"
        )
    cursor = dict.fromkeys(routers, 0)

    def forced(layer: int, router: nn.Module) -> Callable[[torch.Tensor], RouterOutput]:
        weigh = ROUTER_WEIGHTS[type(router)]

        def forward(hidden_states: torch.Tensor) -> RouterOutput:
            tokens = hidden_states.numel() // router.hidden_dim
            start = cursor[layer]
            if start + tokens > table.shape[0]:
                raise RoutingReplayError(f"layer {layer}: routes for {table.shape[0]} tokens, "
                                         f"asked for tokens {start}..{start + tokens - 1}")
            chosen = table[start : start + tokens, layer].to(hidden_states.device)
            if bool((chosen < 0).any()) or bool((chosen >= router.weight.shape[0]).any()):
                raise RoutingReplayError(f"layer {layer}: expert ids outside 0..{router.weight.shape[0] - 1}")
            cursor[layer] = start + tokens
            return weigh(router, hidden_states, chosen)

        return forward

    for layer, router in routers.items():
        router.forward = forced(layer, router)  # an instance attribute shadows the class's forward
    try:
        yield
    finally:
        for router in routers.values():
            del router.forward
