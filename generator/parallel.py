"""One parallel layout: what the layout search varies, the memory model counts and the step model times."""

from __future__ import annotations

import math

from .api.frozen import frozen


@frozen(kw_only=True)
class Parallel:
    """Cards split into TP x PP x CP x DP (EP inside), the batch, recompute, and the DeepSpeed setting."""

    cards: int
    cards_per_node: int
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    micro_batch_size: int = 1
    global_batch_size: int
    recompute: str = "none"  # "none" | "selective" | "full"
    sequence_parallel: bool = False
    num_layer_list: tuple[int, ...] | None = None  # layers per pipeline stage; None: not placed (the step model)
    zero_stage: int | None = None  # DeepSpeed ZeRO stage (LLaMA-Factory); None: Megatron-style or no DeepSpeed
    offload: bool = False
    mtp_layers: int = 0  # multi-token-prediction layers on the last stage
    ring: int | None = None  # ring-attention degree within cp (Ulysses takes the rest); None: all of cp
    vpp: int = 1  # virtual pipeline stages per card
    recompute_share: float | None = None  # share of layers run twice (MindSpeed --recompute-num-layers); None: by
    # `recompute` (full: every layer, uniform as MindSpeed-LLM --recompute-method uniform and MindFormers
    # recompute: True; selective recomputes activation functions only, which costs no matrix multiply)
    causal: bool = True  # the attention kernel skips the masked half
    # Sequences a sample of the global batch becomes (RL: the responses a prompt is rolled out to, which the update
    # splits over the data-parallel ranks, so the batch tiles in sequences: global x this over micro x DP).
    sequences_per_sample: int = 1

    def __post_init__(self):
        product = self.tp * self.pp * self.cp
        if self.cards % product:
            raise ValueError(f"tp ({self.tp}) x pp ({self.pp}) x cp ({self.cp}) = {product} does not divide "
                             f"{self.cards} cards")
        if self.num_layer_list is not None and (sum(self.num_layer_list) <= 0 or len(self.num_layer_list) != self.pp):
            raise ValueError(f"num_layer_list {self.num_layer_list} must have pp ({self.pp}) entries")
        if self.global_batch_size % self.batch_step:
            raise ValueError(f"global batch {self.global_batch_size}{self._sequences} is not divisible by micro batch "
                             f"({self.micro_batch_size}) x dp ({self.dp})")

    @property
    def _sequences(self) -> str:
        """How a refusal counts the batch where a sample is several sequences (RL's responses per prompt)."""
        return f" x {self.sequences_per_sample} sequences" if self.sequences_per_sample > 1 else ""

    @property
    def batch_step(self) -> int:
        """The fewest samples a global batch grows by and still tiles: micro batch x DP sequences, in samples."""
        step = self.micro_batch_size * self.dp
        return step // math.gcd(step, self.sequences_per_sample)

    @property
    def dp(self) -> int:
        return self.cards // (self.tp * self.pp * self.cp)

    @property
    def nodes(self) -> int:
        return -(-self.cards // self.cards_per_node)

    @property
    def local_cards(self) -> int:
        """Cards used on each node: all of them on multi-node jobs, the job's count below one node."""
        return min(self.cards, self.cards_per_node)

    @property
    def grad_accum(self) -> int:
        """Micro batches per optimizer step per DP rank (MindFormers' micro_batch_num when pp > 1)."""
        return self.global_batch_size * self.sequences_per_sample // (self.micro_batch_size * self.dp)

    @property
    def layers_per_stage(self) -> tuple[int, ...]:
        if self.num_layer_list is None:
            raise ValueError("the layout's layers are not placed on its pipeline stages")
        return self.num_layer_list

    @property
    def stage_offsets(self) -> tuple[int, ...]:
        """Each stage's layers minus an even share (MindFormers' `offset`); sums to layers % pp."""
        base = sum(self.layers_per_stage) // self.pp
        return tuple(n - base for n in self.layers_per_stage)

    @property
    def uneven_layers(self) -> bool:
        return len(set(self.layers_per_stage)) > 1

    @property
    def forward_twice(self) -> float:
        """Share of layers whose forward runs again in backward."""
        if self.recompute_share is not None:
            return self.recompute_share
        return 1.0 if self.recompute == "full" else 0.0

    @property
    def ring_degree(self) -> int:
        return self.cp if self.ring is None else self.ring

    def attention_call_len(self, seq_len: int) -> int:
        """Sequence length one fused-attention call sees: ring attention splits it, and a causal ring splits each
        card's share again into two load-balanced halves."""
        ring = self.ring_degree
        if ring == 1:
            return seq_len
        return seq_len // ring // (2 if self.causal else 1)


# A multi-token-prediction layer sits on the last stage with its own output logits: it weighs about two decoder
# layers there (upstream's DeepSeek-V3 671B config gives that stage 2 layers fewer: configs/deepseek3/
# finetune_deepseek3_671b.yaml l. 138, offset [..., -2]).
MTP_STAGE_LAYERS = 2


def split_layers(layers: int, pp: int, mtp_layers: int = 0) -> tuple[int, ...]:
    """Even split; otherwise the remainder goes to the last stages, which hold fewer micro batches in flight. MTP
    layers count as MTP_STAGE_LAYERS decoder layers each on the last stage, which gets that many fewer."""
    if pp == 1:
        return (layers,)
    weight = min(MTP_STAGE_LAYERS * mtp_layers, max(0, layers // pp - 1))
    base, extra = divmod(layers + weight, pp)
    stages = [base + (1 if stage >= pp - extra else 0) for stage in range(pp)]
    stages[-1] -= weight
    return tuple(stages)
