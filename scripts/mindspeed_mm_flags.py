"""Rebuild generator/data/mindspeed_mm_flags_kinds.tsv: the flags pretrain_vlm.py of MindSpeed-MM v2.2.0 parses.

Reads the pinned sources from git mirrors (no upstream code enters the project; only each flag's declaration):
Megatron's parse_args adds its groups (megatron/training/arguments.py, core_v0.12.1), then calls the extra-args
provider that MindSpeed's parse_args_wrapper decorates (mindspeed/arguments.py l. 10-18): MindSpeed-MM's provider
(pretrain_vlm.py -> mindspeed_mm/training.py l. 108: mindspeed_mm/configs/config.py _add_mm_args, then
mindspeed_mm/arguments.py process_args), then MindSpeed's process_args (mindspeed/arguments.py l. 30-53: its groups
and the features of FEATURES_LIST). Both set conflict_handler 'resolve': a later declaration replaces an earlier.

    python3 scripts/mindspeed_mm_flags.py MEGATRON_GIT MINDSPEED_GIT MINDSPEED_MM_GIT \
        > generator/data/mindspeed_mm_flags_kinds.tsv
"""

from __future__ import annotations

import ast
import subprocess
import sys

MEGATRON = "a845aa7e12b3a117e24c2352b9e3e60bad2e3a17"  # core_v0.12.1
MINDSPEED = "5176c6f5f133111e55a404d82bd2dc14a809a6ab"  # the commit MindSpeed-MM v2.2.0's README installs
MINDSPEED_MM = "4c75a551092cf0a510be45277d31e248cd616816"  # v2.2.0
FEATURES = ("functional/profiler_default.py", "optimizer/virtual_optimizer.py",
            "tensor_parallel/unaligned_linear_feature.py", "llava/llava_multimodal.py",
            "pipeline_parallel/unaligned_pineline_feature.py")


def show(git: str, commit: str, path: str) -> str:
    return subprocess.run(["git", "-C", git, "show", f"{commit}:{path}"], check=True, capture_output=True,
                          text=True).stdout


def _literal(node):
    """repr(default) as the table writes it: None (and what is not a literal) as an empty cell."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return ""
    return "" if value is None else repr(value)


def declarations(source: str, origin: str) -> list[dict]:
    """Every add_argument('--flag', ...) call of a module, in source order."""
    out = []
    calls = sorted((n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)), key=lambda n: n.lineno)
    for node in calls:
        if not (isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"):
            continue
        names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        names = [n for n in names if n.startswith("--")]
        if not names:
            continue
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        action = kw["action"].value if isinstance(kw.get("action"), ast.Constant) else "store"
        kind = action if action in ("store_true", "store_false") else "value"
        type_ = kw.get("type")
        type_name = ("<lambda>" if isinstance(type_, ast.Lambda) else type_.id if isinstance(type_, ast.Name)
                     else type_.attr if isinstance(type_, ast.Attribute) else "")
        nargs = kw.get("nargs")
        nargs_text = str(nargs.value) if isinstance(nargs, ast.Constant) else ""
        choices = kw.get("choices")
        choice_text = ""
        if choices is not None:
            try:
                choice_text = ",".join(str(c) for c in ast.literal_eval(choices))
            except (ValueError, SyntaxError):
                choice_text = ""
        dest = kw["dest"].value if isinstance(kw.get("dest"), ast.Constant) else \
            names[0][2:].replace("-", "_")
        default = _literal(kw["default"]) if "default" in kw else ("False" if action == "store_true" else
                                                                   "True" if action == "store_false" else "")
        out.append({"flag": names[0], "kind": kind, "nargs": nargs_text,
                    "type": type_name if kind == "value" else "", "default": default,
                    "choices": choice_text, "dest": dest, "origin": origin, "aliases": ",".join(names[1:])})
    return out


def main(megatron: str, mindspeed: str, mm: str) -> None:
    order: list[tuple[str, str, str]] = [(megatron, MEGATRON, "megatron/training/arguments.py"),
                                         (mm, MINDSPEED_MM, "mindspeed_mm/configs/config.py"),
                                         (mm, MINDSPEED_MM, "mindspeed_mm/arguments.py"),
                                         (mindspeed, MINDSPEED, "mindspeed/arguments.py")]
    # FEATURES_LIST (mindspeed/features_manager/__init__.py l. 92-102): the only features process_args registers.
    order += [(mindspeed, MINDSPEED, f"mindspeed/features_manager/{p}") for p in FEATURES]
    table: dict[str, dict] = {}
    for git, commit, path in order:
        for row in declarations(show(git, commit, path), path):
            for name in [row["flag"], *filter(None, row["aliases"].split(","))]:
                table.pop(name, None)  # conflict_handler 'resolve': the later declaration wins
            table[row["flag"]] = row
    print("# Rebuilt by scripts/mindspeed_mm_flags.py from NVIDIA/Megatron-LM core_v0.12.1 (" + MEGATRON + "),")
    print("# Ascend/MindSpeed " + MINDSPEED + " and Ascend/MindSpeed-MM v2.2.0 (" + MINDSPEED_MM + "): the flags")
    print("# pretrain_vlm.py parses. origin: the file that declares the flag (the last declaration wins). Columns as")
    print("# mindspeed_llm_flags_kinds.tsv: default = repr (empty: None), type empty = argparse's str.")
    columns = ["flag", "kind", "nargs", "type", "default", "choices", "dest", "origin", "aliases"]
    print("\t".join(columns))
    for name in sorted(table):
        print("\t".join(table[name][c] for c in columns))


if __name__ == "__main__":
    main(*sys.argv[1:4])
