"""The plan: what the resolver decided, with derived facts as read-only properties and a fixed JSON form.

Sizes use one vocabulary (tp, pp, dp, cp, ep); each framework's own spelling lives only in its renderer.
"""

from __future__ import annotations

from dataclasses import field, replace

from .api.contract import RoleKind, Settings
from .api.frozen import frozen
from .api.notes import Note
from .dataset import DataShape
from .families.hf_trainer.words import deepspeed_words
from .memory import MemoryBreakdown, optimizer_shard_groups
from .parallel import Parallel
from .scheduler import Scheduler
from .tables import Model
from .training import Training, plan_json

# The search only accepts layouts whose estimate leaves this share of the usable memory free: the estimate is a
# model, not a measurement, and a job that OOMs after the checkpoint has loaded costs far more than one more node.
HEADROOM = 0.10


@frozen
class MinCards:
    """The minimum card count, the row or rule that gave it, and the case of the table that applied."""

    value: int
    source: str  # which table row / preset / memory-model case gave it
    case: str  # "exact row", "pretrain uses the full row", "next larger seq_len row", "largest seq_len row",
    #            "preset", "memory model (no table row)", "memory model (the table gives no count)"


@frozen
class Estimate:
    """One framework's rate and time: the tokens, the tokens/s per card and the hours, and their sources."""

    total_tokens: float | None  # tokens x epochs
    tokens_per_card_s: float
    tps_source: str
    is_estimate: bool
    time_hours: float | None  # for the chosen card count
    budget_cards: int | None = None  # cards the time budget asked for, before rounding to the platform
    mfu: float | None = None  # model FLOPs utilisation of the estimate (None when measured)
    time_high_hours: float | None = None  # the range's upper end where the rate is estimated (throughput.py)
    rate_share: float = 1.0  # the share of the layout's own rate the plan claims (scaling.py; 1: all of it)


@frozen
class Rejected:
    """A layout the search turned down, and why."""

    framework: str
    layout: str
    reason: str

    def to_json(self) -> dict:
        return {"framework": self.framework, "layout": self.layout, "reason": self.reason}


@frozen(kw_only=True)
class Layout(Parallel):
    """One framework's parallel layout with its memory estimate and where it came from."""

    framework: str
    memory: MemoryBreakdown
    usable_gb: float
    usable_cap: str = ""  # the upstream setting that caps usable_gb below the hardware's (empty: none does)
    optimizer_shard: int | None = None  # MindSpore's optimizer_weight_shard_size when its parallel optimizer is on
    expert_tp: bool = True  # TP splits the routed experts too (MemoryJob.expert_tp)
    deepspeed: bool = False  # the framework trains through DeepSpeed (LLaMA-Factory), so zero_stage applies
    source: str = "search"  # "preset: validated (...)" | "search" | "pinned"
    preset_level: str | None = None
    measured: str = ""  # upstream's published run of this very layout (its source): it fits, whatever the estimate
    pinned_at: str | None = None  # the spec key whose pins it keeps: layout.<framework>, or a role's own

    @property
    def budget_gb(self) -> float:
        """What the search lets the estimate use: the usable memory less the headroom."""
        return self.usable_gb * (1.0 - HEADROOM)

    @property
    def deepspeed_label(self) -> str:
        """The DeepSpeed setting in words, one spelling everywhere: "ZeRO-3 + offload", "none", or "-" (Megatron)."""
        return deepspeed_words(self.zero_stage, self.offload) if self.deepspeed else "-"

    @property
    def states_split(self) -> tuple[int, int] | None:
        """(dense, expert): how many ways the parallel optimizer splits the AdamW states; None where it is off."""
        return None if self.optimizer_shard is None else optimizer_shard_groups(self, self.optimizer_shard,
                                                                                      self.expert_tp)

    @property
    def memory_share(self) -> float:
        """The estimate as a share of the usable memory."""
        return self.memory.total / self.usable_gb

    @property
    def fits(self) -> bool:
        """Within the budget, or upstream's run of it as it is (`fits`)."""
        return fits(self.memory, self.usable_gb, self.measured)

    def describe(self) -> str:
        parts = [f"tp={self.tp}", f"pp={self.pp}", f"dp={self.dp}"]
        if self.cp > 1:
            parts.append(f"cp={self.cp}")
        if self.ep > 1:
            parts.append(f"ep={self.ep}")
        parts.append(f"mbs={self.micro_batch_size}")
        parts.append(f"recompute={self.recompute}")
        if self.deepspeed:
            parts.append(f"deepspeed={self.deepspeed_label}")
        elif self.offload:  # a framework offloading outside DeepSpeed (verl's FSDP states between phases)
            parts.append("offload=on")
        return " ".join(parts)


def fits(memory: MemoryBreakdown, usable_gb: float, measured: str) -> bool:
    """Whether a layout fits: its estimate within the usable memory less HEADROOM, or `measured`, upstream's run of
    it as it is (the headroom covers the memory model's error, which a measured run has none of)."""
    return bool(measured) or memory.total <= usable_gb * (1.0 - HEADROOM)


def _layout_json(lay: Layout) -> dict:
    return {
        "cards": lay.cards, "nodes": lay.nodes, "tp": lay.tp, "pp": lay.pp, "dp": lay.dp, "cp": lay.cp,
        "ep": lay.ep, "micro_batch_size": lay.micro_batch_size, "global_batch_size": lay.global_batch_size,
        "grad_accum": lay.grad_accum, "recompute": lay.recompute, "sequence_parallel": lay.sequence_parallel,
        "zero_stage": lay.zero_stage, "offload": lay.offload,
        "memory_per_card_gib": round(lay.memory.total, 2), "usable_gib": lay.usable_gb,
        "budget_gib": round(lay.budget_gb, 2),
        "memory_breakdown_gib": {k: round(v, 2) for k, v in lay.memory.items()},
        "num_layer_list": list(lay.layers_per_stage), "source": lay.source,
    }


def _layout_settings(lay: Layout) -> dict:
    """Only where set, so that the plan.json of a job without them stays as it was."""
    return {**({"usable_cap": lay.usable_cap} if lay.usable_cap else {}),
            **({"measured": lay.measured} if lay.measured else {}),
            **({"parallel_optimizer": {"optimizer_weight_shard_size": lay.optimizer_shard,
                                       "states_split": dict(zip(("dense", "expert"), lay.states_split))}}
               if lay.states_split is not None else {})}


@frozen
class Role:
    """One role of a framework's plan (contract.py RoleKind: train; actor, rollout, reference, critic; serve): its
    own layout, memory estimate and time. Colocated roles share the framework's cards in turns; the others have
    their own."""

    kind: RoleKind
    layout: Layout
    estimate: Estimate
    colocated: bool = True
    choice: str = ""  # why this layout, against the runner-up

    @property
    def trains(self) -> bool:
        """False: it only runs forward, and its estimate has no time (contract.py RoleKind.trains)."""
        return self.kind.trains

    def to_json(self) -> dict:
        return {**_layout_json(self.layout), "colocated": self.colocated, "estimate": _estimate_json(self.estimate),
                "choice": self.choice, **_layout_settings(self.layout)}


@frozen
class RunLength:
    """How long a framework trains in its own terms, where it counts them itself (MindFormers: whole epochs over
    packed data): decided by its plugin's Planning.run_length, shown on plan.json as frameworks.<name>.run, and
    only read by its renderer. `source` says which rule decided the numbers."""

    epochs: int
    stop_step: int | None  # None: the framework's own count ends the run
    total_steps: int  # the schedule's length; -1: the framework's own count
    save_every_steps: int
    source: str
    note: str | None = None  # why epochs is an upper bound, or why it counts other steps than the plan's

    def to_json(self) -> dict:
        return {"epochs": self.epochs, "stop_step": self.stop_step, "total_steps": self.total_steps,
                "save_every_steps": self.save_every_steps, "source": self.source, "note": self.note}


@frozen
class FrameworkPlan:
    """One framework's plan: its roles (the first is the one its recipe's global batch and files follow: `train`
    for a training framework), the minimum cards and the facts its renderer reads. `layout`, `estimate` and
    `choice` are that first role's."""

    name: str
    label: str
    roles: dict[str, Role]
    min_cards: MinCards
    forced: bool = False  # --force accepted fewer cards than the table's minimum
    info: dict = field(default_factory=dict)  # the framework's facts about this model (frameworks.yaml)
    upstream: str | None = None  # the upstream file a renderer follows
    run: RunLength | None = None  # its own run length, where its plugin decides one (Planning.run_length)
    settings: Settings | None = None  # its files' own values, where its plugin decides them (Planning.settings)

    @property
    def primary(self) -> Role:
        return next(iter(self.roles.values()))

    @property
    def layout(self) -> Layout:
        return self.primary.layout

    @property
    def estimate(self) -> Estimate:
        """The first role's estimate; with several training roles, their times added (colocated roles run in
        turns; a role that does not train has no time in this tool)."""
        trained = [role.estimate for role in self.roles.values() if role.trains]
        if len(trained) <= 1:
            return self.primary.estimate
        # A training role with a rate of 0 has no time of its own (its plugin counts it inside another role's
        # figure, or nothing is published): the times of the others are added.
        timed = [est for est in trained if est.tokens_per_card_s > 0]
        hours = [est.time_hours for est in timed if est.time_hours is not None]
        high = [est.time_high_hours for est in timed if est.time_high_hours is not None]
        whole = timed and len(hours) == len(timed) == len(high)
        return replace(self.primary.estimate, time_hours=sum(hours) if whole else None,
                       time_high_hours=sum(high) if whole else None)

    @property
    def choice(self) -> str:
        return self.primary.choice

    @property
    def cards(self) -> int:
        """The framework's cards: colocated roles take turns on the same cards (the peak over the phases); a role
        on cards of its own adds them."""
        shared = [role.layout.cards for role in self.roles.values() if role.colocated]
        return max(shared, default=0) + sum(role.layout.cards for role in self.roles.values() if not role.colocated)

    @property
    def nodes(self) -> int:
        """Nodes, counted as the cards are: the colocated roles' peak plus the nodes of each role on its own."""
        shared = [role.layout.nodes for role in self.roles.values() if role.colocated]
        return max(shared, default=0) + sum(role.layout.nodes for role in self.roles.values() if not role.colocated)

    @property
    def role_pins(self) -> dict[str, str]:
        """{role: the spec key of its own pins} for each role laid out on pins of its own (layout.<framework>.<role>,
        which replace the framework's for that role), for PLAN.md and --candidates."""
        return {kind: role.layout.pinned_at for kind, role in self.roles.items()
                if role.layout.pinned_at is not None and role.layout.pinned_at != f"layout.{self.name}"}

    def with_primary(self, **changes) -> FrameworkPlan:
        """This plan with its first role changed (its layout, estimate or choice)."""
        kind = self.primary.kind.value
        return replace(self, roles={**self.roles, kind: replace(self.primary, **changes)})

    def to_json(self) -> dict:
        return {
            **_layout_json(self.layout), "cards": self.cards, "nodes": self.nodes,
            "min_cards": {"value": self.min_cards.value, "source": self.min_cards.source, "case": self.min_cards.case},
            "estimate": _estimate_json(self.estimate), "forced": self.forced, "upstream": self.upstream,
            # The attention kernel its framework's facts name (the HF-trainer family's flash_attn; null elsewhere).
            "flash_attn": self.info.get("flash_attn"), "choice": self.choice,
            **_layout_settings(self.layout),
            "roles": {kind: role.to_json() for kind, role in self.roles.items()},
            "run": None if self.run is None else self.run.to_json(),
            **({} if self.settings is None else {"settings": self.settings.to_json()}),
        }


def _estimate_json(est: Estimate) -> dict:
    return {"total_tokens": est.total_tokens, "tokens_per_card_s": round(est.tokens_per_card_s, 1),
            "mfu": None if est.mfu is None else round(est.mfu, 4), "tps_source": est.tps_source,
            "time_hours": None if est.time_hours is None else round(est.time_hours, 2),
            "time_hours_high": None if est.time_high_hours is None else round(est.time_high_hours, 2)}


@frozen
class PathValue:
    """A path the files use: its value, whether it is a placeholder, and the spec key that sets it."""

    value: str
    placeholder: bool  # True: not given in the spec; the user must edit before running
    set_key: str | None = None  # the spec path that sets this placeholder where not its own (PathDefault)


@frozen
class MadeFrom:
    """How render was asked for the plan (plan.json's `made_from`): `check` and a re-render read it back from the
    job folder, so a folder made with --set or --force is checked and re-rendered as it was made."""

    spec_file: str | None = None  # the spec's path from the folder that holds OUT; None: `plan`, which has no OUT
    overrides: tuple[str, ...] = ()  # --set, in the order given
    force: bool = False  # --force was given

    def to_json(self) -> dict:
        return {"spec_file": self.spec_file, "overrides": list(self.overrides), "force": self.force}


@frozen
class Plan:
    """The plan: every value the files hold, and what PLAN.md and plan.json say of it."""

    job: str
    model: str
    hf_id: str
    method: str
    seq_len: int
    hardware: str
    hardware_label: str
    accelerator: str  # "npu" | "gpu"
    cards_per_node: int
    frameworks: dict[str, FrameworkPlan]
    rejected: tuple[Rejected, ...]
    notes: tuple[Note, ...]
    warnings: tuple[Note, ...]  # exit 3 under --strict
    paths: dict[str, PathValue]
    data: DataShape
    master_addr: str | None  # None: multi-node launch scripts ask for it at run time
    socket_ifname: str | None  # the collective library's network interface across nodes; None: the node's default
    master_port: int
    shared_storage: bool  # cluster.shared_storage: every node reads output_dir (the default the plan assumes)
    spec_sha256: str
    shape: Model  # the model table row
    epochs: float
    samples_per_epoch: int | None
    tokens_per_epoch: int | None  # data.total_tokens, or samples x tokens_per_sample
    quantization_bit: int | None  # spec samples, or total_tokens / seq_len; None without data
    train: Training  # the method's recipe: what every framework shares (steps, batch, checkpoints, adapters)
    version: str = field(default="")
    made_from: MadeFrom = MadeFrom()
    data_rows: int | None = None  # fine-tuning: the data file's rows the steps are sized for (data.samples)
    recipes: dict[str, Training] = field(default_factory=dict)  # the recipe each framework trains with
    rl: dict = field(default_factory=dict)  # the spec's `rl:` keys (an RL plugin decides the rest from them)
    scheduler: Scheduler = Scheduler()  # cluster.scheduler: how the job is submitted
    time_budget_hours: float | None = None  # the spec's: the answer says whether each framework meets it
    charts: tuple = ()  # charts.Chart: the plan in pictures (PLAN.md)

    def no_time(self, fp: FrameworkPlan) -> str:
        """Why `fp` has no time estimate, in a few words (the answer's time column)."""
        if not fp.primary.trains:
            return "does not train"
        if fp.estimate.tokens_per_card_s <= 0:
            return "no rate published for it"
        return "the spec gives no data size"

    def meets_budget(self, fp: FrameworkPlan) -> bool | None:
        """Whether `fp`'s estimate meets the time budget (None: no budget or no estimate); the resolver's
        tolerance (_over_budget)."""
        took = fp.estimate.time_hours
        return None if took is None or self.time_budget_hours is None else took <= self.time_budget_hours * 1.0001
    extra: dict = field(default_factory=dict)  # the spec's `extra:`: framework -> options its files pass as given

    @property
    def framework_recipes(self) -> dict[str, Training]:
        """The recipe each planned framework trains with (a plan built without them: the method's for all)."""
        return self.recipes or {name: self.train for name in self.frameworks}

    def for_framework(self, name: str) -> Plan:
        """This plan as `name`'s renderer reads it: `train` is the recipe that framework trains with."""
        return replace(self, train=self.recipes.get(name, self.train))

    def output_dir(self, framework: str) -> str:
        """Where `framework` writes checkpoints and logs: its own folder under paths.output_dir."""
        return f"{self.paths['output_dir'].value.rstrip('/')}/{framework}"

    @property
    def socket_ifname_env(self) -> str:
        """The collective library's interface variable: HCCL on Ascend, NCCL on NVIDIA GPUs."""
        return "HCCL_SOCKET_IFNAME" if self.accelerator == "npu" else "NCCL_SOCKET_IFNAME"

    @property
    def main(self) -> FrameworkPlan:
        """The framework that needs the most cards (ties: the first); its numbers are the plan's top level."""
        return max(self.frameworks.values(), key=lambda f: f.cards)

    @property
    def cards(self) -> int:
        return self.main.cards

    @property
    def trains(self) -> bool:
        """Whether any role trains (inference alone has no training recipe and no time)."""
        return any(role.trains for fp in self.frameworks.values() for role in fp.roles.values())

    @property
    def several_roles(self) -> bool:
        """Whether a framework runs more than one role (PLAN.md and `plan` then show each role's layout)."""
        return any(len(fp.roles) > 1 for fp in self.frameworks.values())

    @property
    def nodes(self) -> int:
        return self.main.nodes

    def to_json(self) -> dict:
        slowest = max(self.frameworks.values(), key=lambda f: f.estimate.time_hours or 0.0)
        return {
            "job": self.job, "model": self.model, "hf_id": self.hf_id, "method": self.method,
            "quantization_bit": self.quantization_bit,
            "seq_len": self.seq_len,
            "hardware": self.hardware, "cards": self.cards, "nodes": self.nodes,
            "cards_per_node": self.cards_per_node,
            "min_cards": {"value": self.main.min_cards.value, "source": self.main.min_cards.source},
            "estimate": {**_estimate_json(slowest.estimate), "framework": slowest.name},
            "frameworks": {name: fp.to_json() for name, fp in self.frameworks.items()},
            "rejected": [r.to_json() for r in self.rejected],
            "notes": [note.to_json() for note in self.notes],
            "warnings": [warned.to_json() for warned in self.warnings],
            "paths": {k: {"value": v.value, "placeholder": v.placeholder} for k, v in self.paths.items()},
            "data": {**self.data.to_json(), "rows": self.data_rows},
            "train": plan_json(self.framework_recipes),
            "cluster": {"master_addr": self.master_addr, "master_port": self.master_port,
                        "socket_ifname": self.socket_ifname, "socket_ifname_env": self.socket_ifname_env,
                        "shared_storage": self.shared_storage,
                        **({"submit": self.scheduler.to_json()} if self.scheduler.kind != "none" else {})},
            **({"extra": self.extra} if self.extra else {}),
            "spec_sha256": self.spec_sha256,
            "made_from": self.made_from.to_json(),
            "gen_launch_version": self.version,
        }
