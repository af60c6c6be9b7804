"""KV cache groups: layers of one kind share a block table, groups share one pool of pages."""

from __future__ import annotations

from llmkit.model.kv_layout import plan_kv_layout

SHAPE = (2, 16)


def test_alternating_windows_pair_each_windowed_layer_with_a_full_one():
    layout = plan_kv_layout([SHAPE] * 4, [128, None, 128, None])  # gpt-oss
    assert layout.windows == (None, 128)
    assert layout.cache_groups == (1, 0, 1, 0)
    assert layout.cache_slots == (0, 0, 1, 1)  # layers 0 and 1 share tensor pair 0
    assert layout.layers_per_page == 2


def test_five_local_layers_to_one_global_make_six_groups_of_one():
    layout = plan_kv_layout([SHAPE] * 6, [16] * 5 + [None])  # Gemma 3
    assert layout.windows == (None, 16, 16, 16, 16, 16)
    assert layout.cache_groups == (1, 2, 3, 4, 5, 0)
    assert layout.layers_per_page == 1
    # One sequence of 1000 tokens in 64-token chunks: 63 blocks for the global layer, and
    # each local one the 15 keys before a chunk and the chunk: at most 6 blocks.
    assert layout.blocks_per_sequence(1000, 64, 16) == 63 + 5 * 6


def test_caches_of_different_shapes_share_a_slot_at_the_widest():
    # Gemma 4: its global layers have fewer, wider KV heads than the local ones.
    layout = plan_kv_layout(
        [(4, 16), (4, 16), (1, 32), (4, 16), (4, 16), (1, 32)], [16, 16, None] * 2
    )
    assert layout.windows == (None, 16, 16)
    assert layout.cache_groups == (1, 1, 0, 2, 2, 0)
    assert layout.slot_sizes == (64, 64)  # the global layers' 32 a token fill half a page


def test_a_model_of_one_kind_keeps_one_group():
    assert plan_kv_layout([SHAPE] * 3, [None] * 3).windows == (None,)
    mistral = plan_kv_layout([SHAPE] * 3, [4096] * 3)
    assert mistral.windows == (4096,) and mistral.cache_slots == (0, 1, 2)
    off = plan_kv_layout([SHAPE] * 2, [128, None], hybrid=False)
    assert off.windows == (None,) and off.layers_per_page == 2
    assert plan_kv_layout([], []).windows == (None,)  # an encoder
