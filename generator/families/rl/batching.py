"""Dynamic batch size in an RL trainer's FSDP workers: micro batches packed to a token limit instead of a count of
sequences. verl's performance tuning guide (verl 0.7.0 docs/perf/perf_tuning.rst l. 148-149) asks the actor's limit
(and the forward-only log-prob limits, which may be larger: l. 151-153) to hold at least 2 x (max_prompt_length +
max_response_length), and the critic's at least 2x the actor's (l. 155-159). verl packs `limit x SP` tokens per
micro batch of an SP group (verl/workers/actor/dp_actor.py l. 367, 441; critic/dp_critic.py l. 168, 212), and each
card holds its 1/SP share, so the rule holds for the limit per card x SP; the memory model counts a micro batch of
`SEQUENCES` (the critic's: `CRITIC_SEQUENCES`) full sequences split over SP."""

from __future__ import annotations

SEQUENCES = 2  # l. 148-149: at least 2 x (prompt + response) a micro batch
CRITIC_SEQUENCES = 2 * SEQUENCES  # l. 155-159: the critic's at least 2x the actor's


def token_limit(seq_len: int, sp: int, sequences: int) -> int:
    """The per-card token limit (`*_max_token_len_per_gpu`) whose SP group packs `sequences` full sequences of
    `seq_len` tokens a micro batch."""
    return -(-sequences * seq_len // sp)


def limit_source(sequences: int, seq_len: int, sp: int, example: tuple[str, str] | None, critic: bool,
                 guide: str) -> str:
    """Why a token limit is what it is: the guide's rule (`guide`: the framework's tuning guide), and the followed
    example's own (its formula, its source) where it sets one."""
    rule = (f"derived: {sequences} x (prompt + response) = {sequences * seq_len} tokens a micro batch of the SP "
            f"group, / SP {sp} a card ({guide} l. 148-149" + (", the critic's 2x the actor's, l. 155-159" if critic
                                                               else "") + ")")
    return rule + (f"; the example's is {example[0]} ({example[1]})" if example else "")
