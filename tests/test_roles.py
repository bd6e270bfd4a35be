"""Issue 24: a framework's plan holds roles, each with its own layout, memory estimate and time; colocated roles
take turns on the same cards, so the framework's cards are the peak over them. A role that does not train (a
rollout engine) holds its bf16 weights and one forward's working set, and has no time of its own. Proved with a toy
framework added through the CLI as data (a frameworks.yaml row in a copied data folder), a plugin module (two roles
of different TP) and templates, rendered, and read back from plan.json, PLAN.md and `plan`."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner
from helpers import add_framework, assert_meets_contract, clear_table_caches, install_plugin, note_lines

from generator import spec as spec_module
from generator import tables as tables_module
from generator.cli import main
from generator.frameworks import registry

DUO_ROW = """
  - name: duo
    plugin: duo_roles_plugin
    label: "Duo 1.0 (an actor and a rollout engine, for the roles test)"
    memory: megatron-distopt
    methods: [full]
    dataset_formats: [alpaca]
    overhead_gb: 3.0
    throughput: {model: mfu, mfu: {pretrain: 0.3, full: 0.3, lora: 0.3, qlora: 0.3, moe: 0.2}, source: "a test"}
    min_cards_from: llama-factory  # a column without Qwen3-14B: the memory model decides
    support: listed
    models:
      qwen3-14b: {}
"""
# The actor trains on the model-parallel grid at TP 1; the other role (the rollout engine; a critic in the variants
# below) runs at TP 2, without pipeline stages; both on the same cards in turns.
DUO_PLUGIN = """
from generator.frameworks.base import DefaultPlanning
from generator.frameworks.contract import Plugin, RoleDef, RoleKind
from generator.spaces import GridSpace

ACTOR, SECOND = GridSpace(tp_choices=(1,)), GridSpace(tp_choices=(2,), pp_choices=(1,))


class Planning(DefaultPlanning):
    def roles(self, method):
        return (RoleDef(RoleKind.ACTOR), RoleDef(RoleKind.ROLLOUT))

    def space(self, role):
        return ACTOR if role is RoleKind.ACTOR else SECOND


class Output:
    options = ()
    launchers = ()

    def render(self, plan, env):
        fp = plan.frameworks["duo"]
        return {"duo/roles.yaml": env.get_template("duo/roles.yaml.j2").render(roles=fp.roles)}

    def plan_section(self, plan, env):
        fp = plan.frameworks["duo"]
        return env.get_template("duo/plan_section.md.j2").render(roles=list(fp.roles), cards=fp.cards)

    def check(self, job, path):
        return None


PLUGIN = Plugin("duo", planning=Planning(), output=Output())
"""
DUO_TRAIN = ("{% for kind, role in roles.items() %}{{ kind }}: {tp: {{ role.layout.tp }}, pp: {{ role.layout.pp }}, "
             "cards: {{ role.layout.cards }}}\n{% endfor %}")
DUO_SECTION = "Duo runs {{ roles | join(' and ') }} on {{ cards }} card(s).\n"


@pytest.fixture
def duo(tmp_path, monkeypatch):
    """Copies of data, schema and templates with the duo framework added; its plugin on sys.path."""
    add_framework(tmp_path, monkeypatch, "duo", DUO_ROW, "duo_roles_plugin", DUO_PLUGIN,
                  {"roles.yaml.j2": DUO_TRAIN, "plan_section.md.j2": DUO_SECTION})
    yield tmp_path
    clear_table_caches()


def _spec(folder, **extra):
    spec = {"job": "duojob", "model": "qwen3-14b", "method": "full", "seq_len": 4096, "hardware": "snt9b",
            "frameworks": ["duo"], "data": {"samples": 20000, "tokens_per_sample": 1024}, **extra}
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return path


NOT_ESTIMATED = "not estimated: rollout does not train; gen-launch has no generation-rate model yet"


def test_two_colocated_roles_each_with_its_own_layout_on_the_peak_cards(duo):
    out = duo / "out"
    result = CliRunner().invoke(main, ["render", str(_spec(duo)), "-o", str(out)])
    assert result.exit_code == 0, result.output + result.stderr
    job = out / "duojob"
    plan = json.loads((job / "plan.json").read_text(encoding="utf-8"))
    fw = plan["frameworks"]["duo"]
    actor, rollout = fw["roles"]["actor"], fw["roles"]["rollout"]
    assert list(fw["roles"]) == ["actor", "rollout"]
    # Each role its own TP and memory estimate; only the training role has a rate and a time, so the framework's
    # time is the actor's.
    assert (actor["tp"], rollout["tp"], rollout["pp"]) == (1, 2, 1)
    assert actor["memory_per_card_gib"] != rollout["memory_per_card_gib"]
    assert all(role["memory_per_card_gib"] <= role["budget_gib"] for role in (actor, rollout))
    assert actor["estimate"]["tokens_per_card_s"] > 0 and actor["estimate"]["time_hours"] > 0
    assert rollout["estimate"] == {"total_tokens": None, "tokens_per_card_s": 0.0, "mfu": None,
                                   "tps_source": NOT_ESTIMATED, "time_hours": None, "time_hours_high": None}
    assert fw["estimate"] == actor["estimate"]
    # Colocated: one card count, the peak of what each role needs alone (the actor's 8: the rollout engine holds
    # no training state), and the plan's.
    assert actor["colocated"] and rollout["colocated"]
    assert actor["cards"] == rollout["cards"] == fw["cards"] == plan["cards"] == fw["min_cards"]["value"] == 8
    # The framework's top-level layout keys are its first role's (what renderers read).
    assert (fw["tp"], fw["pp"], fw["memory_per_card_gib"]) == (actor["tp"], actor["pp"],
                                                                actor["memory_per_card_gib"])
    # The framework's own file and PLAN.md show both roles.
    roles = yaml.safe_load((job / "duo" / "roles.yaml").read_text(encoding="utf-8"))
    assert roles == {"actor": {"tp": 1, "pp": actor["pp"], "cards": fw["cards"]},
                     "rollout": {"tp": 2, "pp": 1, "cards": fw["cards"]}}
    text = (job / "PLAN.md").read_text(encoding="utf-8")
    assert f"Duo runs actor and rollout on {fw['cards']} card(s)." in text
    for kind, role, speed in (("actor", actor, f"{actor['estimate']['tokens_per_card_s']:.0f}"),
                              ("rollout", rollout, NOT_ESTIMATED)):
        assert (f"| duo | {kind} | {fw['cards']} | yes | {role['tp']} | {role['pp']} | {role['dp']} | "
                f"{role['cp']} | {role['ep']} | {role['micro_batch_size']} | {role['recompute']} | - | "
                f"{role['memory_per_card_gib']:.1f} of 58 | {speed} |") in text


def test_a_role_that_does_not_train_holds_weights_and_one_forward(duo):
    # The rollout engine runs forward only: bf16 weights split by TP x PP, one layer's activations at its micro
    # batch (nothing kept for a backward, so no recompute), the last stage's fp32 logits and the runtime overhead.
    plan = json.loads(CliRunner().invoke(main, ["plan", str(_spec(duo)), "--json"]).stdout)
    rollout = plan["frameworks"]["duo"]["roles"]["rollout"]
    parts = rollout["memory_breakdown_gib"]
    assert parts["gradients"] == parts["optimizer states"] == 0.0 and rollout["recompute"] == "none"
    model = tables_module.load_tables().model("qwen3-14b")
    tp, pp, tokens = rollout["tp"], rollout["pp"], 4096 * rollout["micro_batch_size"]
    weights = 2.0 * model.params / (tp * pp)
    # Sequence parallel (on at TP > 1) splits the norms' 4 hidden-sized tensors; TP splits q, k, v, the attention
    # output and SwiGLU's 3 F-sized tensors.
    layer = 2.0 * tokens * (4 * model.hidden + 2 * model.q_dim + 2 * model.kv_dim + 3 * model.ffn) / tp
    logits = 4.0 * tokens * model.vocab / tp
    assert rollout["memory_per_card_gib"] == pytest.approx((weights + layer + logits) / 2**30 + 3.0, abs=0.02)
    assert parts["weights"] == pytest.approx(weights / 2**30, abs=0.01)


def _with_roles(duo, monkeypatch, module: str, roles: str) -> None:
    """The duo framework with `roles` (the plugin's RoleDef expressions after the actor's) in plugin `module`."""
    frameworks = duo / "data" / "frameworks.yaml"
    frameworks.write_text(frameworks.read_text(encoding="utf-8").replace("plugin: duo_roles_plugin",
                                                                         f"plugin: {module}"), encoding="utf-8")
    install_plugin(duo, monkeypatch, module, DUO_PLUGIN.replace("RoleDef(RoleKind.ROLLOUT)", roles))
    clear_table_caches()


def test_the_cards_are_the_peak_the_largest_role_needs(duo, monkeypatch):
    # A critic trains: alone, the actor (TP 1, any PP) fits Qwen3-14B on 8 cards; the critic (TP 2, no PP) needs
    # 32, where the memory model finds its weights, gradients and states small enough. Colocated, both run on 32,
    # in turns: the framework's time is the two roles' added.
    _with_roles(duo, monkeypatch, "duo_critic_plugin", "RoleDef(RoleKind.CRITIC)")
    result = CliRunner().invoke(main, ["plan", str(_spec(duo)), "--json"])
    assert result.exit_code == 0, result.stderr
    plan = json.loads(result.stdout)
    fw = plan["frameworks"]["duo"]
    actor, critic = fw["roles"]["actor"], fw["roles"]["critic"]
    assert "duo: 32 cards, the peak its colocated roles need (8 for actor)" in note_lines(plan["notes"])
    assert fw["cards"] == plan["cards"] == actor["cards"] == critic["cards"] == 32
    assert (critic["tp"], critic["dp"]) == (2, 16)
    assert fw["min_cards"]["value"] == 8  # the first role's own minimum (the memory model's)
    assert critic["memory_breakdown_gib"]["gradients"] > 0 and critic["estimate"]["time_hours"] > 0
    # plan.json rounds each of the three to 0.01 h, so their sum may miss by up to 0.015
    assert fw["estimate"]["time_hours"] == pytest.approx(actor["estimate"]["time_hours"]
                                                         + critic["estimate"]["time_hours"], abs=0.015)


def test_a_card_count_too_small_for_a_colocated_role_is_refused(duo, monkeypatch):
    _with_roles(duo, monkeypatch, "duo_critic_plugin", "RoleDef(RoleKind.CRITIC)")
    result = CliRunner().invoke(main, ["plan", str(_spec(duo, cards=8))])
    assert result.exit_code == 2 and "cards: 8 cards: duo's critic role shares them with actor and fits on no " \
        "fewer than 32; use 32, or --force to try anyway" in result.stderr
    forced = CliRunner().invoke(main, ["plan", str(_spec(duo, cards=8)), "--json", "--force"])
    assert forced.exit_code == 0, forced.stderr
    plan = json.loads(forced.stdout)
    assert plan["cards"] == plan["frameworks"]["duo"]["roles"]["critic"]["cards"] == 8
    assert any(warning.startswith("duo critic: layout tp=2 pp=1") for warning in note_lines(plan["warnings"]))


def test_a_role_on_cards_of_its_own_adds_them(duo, monkeypatch):
    # The critic on cards of its own: the actor keeps its 8, the critic takes 32, the framework 40 (5 nodes).
    _with_roles(duo, monkeypatch, "duo_split_plugin", "RoleDef(RoleKind.CRITIC, colocated=False)")
    result = CliRunner().invoke(main, ["plan", str(_spec(duo)), "--json"])
    assert result.exit_code == 0, result.stderr
    plan = json.loads(result.stdout)
    fw = plan["frameworks"]["duo"]
    actor, critic = fw["roles"]["actor"], fw["roles"]["critic"]
    assert (actor["cards"], actor["colocated"], critic["cards"], critic["colocated"]) == (8, True, 32, False)
    assert fw["cards"] == plan["cards"] == 40 and fw["nodes"] == plan["nodes"] == 5
    assert not any("the peak its colocated roles need" in note for note in note_lines(plan["notes"]))


def test_plan_and_candidates_show_each_role(duo):
    result = CliRunner().invoke(main, ["plan", str(_spec(duo)), "--candidates"])
    assert result.exit_code == 0, result.stderr
    assert "roles (colocated roles take turns" in result.stdout
    roles = [line.split() for line in result.stdout.split("roles (", 1)[1].splitlines() if line.startswith("duo ")]
    assert [row[:5] for row in roles[:2]] == [["duo", "actor", "8", "yes", "1"], ["duo", "rollout", "8", "yes", "2"]]
    assert " ".join(roles[1]).endswith(" not estimated (does not train)")
    assert "duo actor (" in result.stdout and "duo rollout (" in result.stdout
    data = json.loads(CliRunner().invoke(main, ["plan", str(_spec(duo)), "--json", "--candidates"]).stdout)
    by_role = {kind: [row for row in data["candidates"]["duo"] if row["role"] == kind] for kind in ("actor", "rollout")}
    assert all(row["layout"].startswith("tp=1 ") for row in by_role["actor"])
    # The rollout engine runs no backward: its search offers no recompute.
    assert by_role["rollout"] and all(row["layout"].startswith("tp=2 pp=1 ") and
                                      row["layout"].endswith(" recompute=none") and row["tokens_per_card_s"] == 0.0
                                      for row in by_role["rollout"])
    assert [sum(row["chosen"] for row in rows) for rows in by_role.values()] == [1, 1]


def test_the_two_role_plugin_meets_the_contract(duo, monkeypatch):
    assert_meets_contract("duo", registry()["duo"], duo / "out", monkeypatch)


def test_every_plugin_declares_its_paths_in_the_schema():
    # The contract: the paths a plugin writes defaults for are paths.<key> the spec may give (schema), and each
    # training framework's first role is `train` (an RL framework's, the actor; a served method's, serve).
    keys = spec_module.path_keys()
    tables = tables_module.load_tables()
    for name, found in registry().items():
        assert set(found.planning.path_keys) <= set(keys), name
        for method in tables.frameworks[name].methods:
            first = "actor" if method in tables_module.RL_METHODS else \
                "serve" if method in tables_module.SERVING_METHODS else "train"
            assert found.planning.roles(method)[0].kind.value == first, (name, method)
