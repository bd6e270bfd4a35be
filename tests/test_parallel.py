"""One parallel layout's arithmetic (generator/parallel.py): the refusals of a layout that cannot run and each derived
count, asserted as values (the mutation run of issue 42, bench/mutants.py, found them unchecked)."""

from __future__ import annotations

import dataclasses

import pytest

from generator.parallel import MTP_STAGE_LAYERS, Parallel, split_layers


def layout(**fields) -> Parallel:
    return Parallel(**{"cards": 16, "cards_per_node": 8, "global_batch_size": 64, **fields})


def test_the_defaults_are_one_way_of_everything():
    p = layout()
    assert (p.tp, p.pp, p.cp, p.ep, p.vpp, p.micro_batch_size) == (1, 1, 1, 1, 1, 1)
    assert (p.recompute, p.sequence_parallel, p.offload, p.causal) == ("none", False, False, True)
    assert (p.zero_stage, p.ring, p.recompute_share, p.num_layer_list, p.mtp_layers) == (None, None, None, None, 0)


def test_a_layout_is_a_value():
    """Layouts are compared and collected in sets by the search: equal fields, one layout; never changed in place."""
    assert len({layout(tp=2), layout(tp=2), layout(tp=4)}) == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        layout().tp = 2  # type: ignore[misc]
    with pytest.raises(TypeError):
        Parallel(16, 8, global_batch_size=64)  # type: ignore[misc]  # keyword only: tp and cards never swap


@pytest.mark.parametrize("tp,pp,cp,cards", [(3, 1, 1, 16), (2, 3, 1, 16), (1, 1, 3, 8), (4, 2, 2, 24)])
def test_cards_that_the_layout_does_not_divide_are_refused(tp, pp, cp, cards):
    with pytest.raises(ValueError, match=rf"= {tp * pp * cp} does not divide {cards} cards"):
        layout(cards=cards, tp=tp, pp=pp, cp=cp, global_batch_size=cards * 8)


@pytest.mark.parametrize("tp,pp,cp,dp", [(2, 2, 2, 2), (8, 1, 1, 2), (1, 16, 1, 1), (2, 1, 4, 2)])
def test_dp_is_the_cards_left_by_tp_pp_and_cp(tp, pp, cp, dp):
    assert layout(tp=tp, pp=pp, cp=cp, num_layer_list=(1,) * pp).dp == dp


def test_the_global_batch_divides_by_micro_batch_times_dp():
    # dp 4 (tp 2, pp 2): micro batch 2 x dp 4 = 8 divides 24, 3 micro batches per step; 20 is divisible by dp alone
    assert layout(tp=2, pp=2, micro_batch_size=2, global_batch_size=24, num_layer_list=(2, 2)).grad_accum == 3
    with pytest.raises(ValueError, match=r"global batch 20 is not divisible by micro batch \(2\) x dp \(4\)"):
        layout(tp=2, pp=2, micro_batch_size=2, global_batch_size=20, num_layer_list=(2, 2))
    with pytest.raises(ValueError, match="global batch 6 "):
        layout(global_batch_size=6, micro_batch_size=2)  # divisible by micro batch 2 alone, not by 2 x dp 16


@pytest.mark.parametrize("layers", [(4,), (2, 2, 2), (0, 0)])
def test_a_layer_list_needs_one_entry_per_stage_and_some_layers(layers):
    with pytest.raises(ValueError, match=r"must have pp \(2\) entries"):
        layout(pp=2, num_layer_list=layers)


def test_a_single_layer_list_of_one_layer_is_taken():
    assert layout(pp=2, num_layer_list=(1, 0)).layers_per_stage == (1, 0)


@pytest.mark.parametrize("cards,per_node,nodes,local", [(16, 8, 2, 8), (17, 8, 3, 8), (4, 8, 1, 4), (8, 8, 1, 8)])
def test_nodes_round_up_and_local_cards_stop_at_one_node(cards, per_node, nodes, local):
    p = layout(cards=cards, cards_per_node=per_node, global_batch_size=cards * 4)
    assert (p.nodes, p.local_cards) == (nodes, local)


def test_stages_place_layers_with_offsets_from_an_even_share():
    p = layout(pp=4, num_layer_list=(7, 7, 6, 6))  # 26 layers: an even share of 6
    assert p.layers_per_stage == (7, 7, 6, 6)
    assert p.stage_offsets == (1, 1, 0, 0)
    assert p.uneven_layers
    even = layout(pp=2, num_layer_list=(5, 5))
    assert (even.stage_offsets, even.uneven_layers) == ((0, 0), False)
    with pytest.raises(ValueError, match="not placed"):
        _ = layout(pp=2).layers_per_stage


def test_context_parallel_names_its_algorithm_only_when_used():
    from generator.families.megatron.flags import cp_algo

    assert cp_algo(layout(cp=2).cp) == "megatron_cp_algo"
    assert cp_algo(layout(cp=1).cp) is None


@pytest.mark.parametrize("recompute,share,twice", [("full", None, 1.0), ("selective", None, 0.0), ("none", None, 0.0),
                                                   ("full", 0.25, 0.25), ("none", 0.5, 0.5)])
def test_forward_twice_is_the_recomputed_share(recompute, share, twice):
    assert layout(recompute=recompute, recompute_share=share).forward_twice == twice


@pytest.mark.parametrize("cp,ring,causal,seq,call", [(1, None, True, 8192, 8192), (4, None, True, 8192, 1024),
                                                     (4, None, False, 8192, 2048), (4, 2, True, 8192, 2048),
                                                     (4, 1, True, 8192, 8192), (8, 4, False, 8192, 2048)])
def test_one_attention_call_sees_the_ring_share_halved_when_causal(cp, ring, causal, seq, call):
    p = layout(cards=16, cp=cp, ring=ring, causal=causal)
    assert p.ring_degree == (cp if ring is None else ring)
    assert p.attention_call_len(seq) == call


@pytest.mark.parametrize("sequences,step", [(2, 8), (4, 4), (3, 16), (32, 1)])
def test_a_batch_of_several_sequences_a_sample_tiles_in_samples(sequences, step):
    """RL: a prompt becomes `sequences` responses, which micro batch x DP (1 x 16) tile: the batch grows by
    16 / gcd(16, sequences) samples (parallel.py batch_step)."""
    assert layout(global_batch_size=step, sequences_per_sample=sequences).batch_step == step
    assert layout(global_batch_size=step, sequences_per_sample=sequences).grad_accum == step * sequences // 16
    if step > 1:
        with pytest.raises(ValueError, match=rf"^global batch {step // 2} x {sequences} sequences is not divisible by "
                                             rf"micro batch \(1\) x dp \(16\)$"):
            layout(global_batch_size=step // 2, sequences_per_sample=sequences)


@pytest.mark.parametrize("layers,pp,mtp,stages", [(8, 2, 0, (4, 4)), (26, 4, 0, (6, 6, 7, 7)),
                                                  (64, 4, 1, (16, 16, 17, 15)), (64, 4, 2, (17, 17, 17, 13)),
                                                  (8, 4, 1, (2, 2, 2, 2)), (12, 4, 1, (3, 3, 4, 2)),
                                                  (2, 4, 1, (0, 0, 1, 1)), (32, 1, 1, (32,))])
def test_split_layers_gives_the_rest_to_the_last_stages_and_each_mtp_layer_two_layers_there(layers, pp, mtp, stages):
    """parallel.py split_layers: an MTP layer weighs MTP_STAGE_LAYERS = 2 decoder layers on the last stage (DeepSeek-V3
    671B's offset [..., -2], MindFormers configs/deepseek3/finetune_deepseek3_671b.yaml l. 138), at most an even
    share less one, never below none."""
    assert MTP_STAGE_LAYERS == 2
    assert split_layers(layers, pp, mtp) == stages
    assert sum(stages) == layers


def test_split_layers_counts_no_mtp_layer_unless_told():
    assert split_layers(64, 4) == (16, 16, 16, 16)
