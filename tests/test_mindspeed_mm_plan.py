"""Issue 39: what a MindSpeed-MM plan trains and how long it says it takes: the seed table's own row for the method,
samples counted where the framework does not pack, A3 throughput per chip, upstream's measured layouts as
candidates, and the run-time environment launch.sh checks."""

from __future__ import annotations

from helpers import make_spec

from generator.resolve import resolve
from generator.tables import load_tables

T = load_tables()
NAME = "mindspeed-mm"


def plan_of(**fields):
    data = {"model": "qwen2.5_vl-7b", "method": "full", "seq_len": 1024, "hardware": "snt9b", "frameworks": [NAME]}
    return resolve(make_spec(**{**data, **fields}), T)


def test_the_seed_tables_own_method_row_is_read():
    # min_cards.csv l. 117 (seed 000): qwen2.5_vl-7b pretrain 4096 mindspeed-mm; it used to map to the full row (l. 116)
    minimum = plan_of(method="pretrain", seq_len=4096).frameworks[NAME].min_cards
    assert minimum.case == "exact row"
    assert minimum.source.startswith("min_cards.csv line 117: qwen2.5_vl-7b pretrain 4096"), minimum.source
    # A method without its own row still takes the row it trains like (qlora -> lora), and says so
    plan = resolve(make_spec(model="qwen3-8b", method="qlora", seq_len=4096, hardware="snt9b",
                             frameworks=["llama-factory"], quantization_bit=4), T)
    assert plan.frameworks["llama-factory"].min_cards.case.startswith("qlora uses the lora row")
