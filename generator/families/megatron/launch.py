"""The torchrun line of a Megatron-style launch.sh (flag groups as bash arrays, then the loading array that the
script picks at run time), as the Megatron-based plugins write it (mindspeed-llm, mindspeed-mm) and check it."""

from __future__ import annotations

import re

from ...checks.shell import bash_arrays

# The loading flags: launch.sh picks one array into CKPT_ARGS at run time (a first launch, or a relaunch that
# finds the job's own checkpoint).
LOADING = ("START_ARGS", "RESUME_ARGS")


def launch_line(launch: str) -> tuple[str, list[list[str]], list[str]]:
    """(entry script, its argument words for each loading array, problems) of a generated launch.sh. The torchrun
    line must pass DISTRIBUTED_ARGS, the entry script, every other flag array in order and then CKPT_ARGS, and
    nothing else."""
    arrays = bash_arrays(launch)
    groups = [name for name in arrays if name != "DISTRIBUTED_ARGS" and name not in LOADING]
    found = re.search(r'^torchrun "\$\{DISTRIBUTED_ARGS\[@\]\}" (\S+) \\\n((?:  "\$\{\w+\[@\]\}" \\\n)*)'
                      r'  2>&1 \| tee ', launch, re.M)
    if not found:
        return "", [], ['the torchrun line is not `torchrun "${DISTRIBUTED_ARGS[@]}" ENTRY "${GROUP[@]}" ... '
                        '2>&1 | tee ...`: words outside the flag arrays are not checked']
    passed = re.findall(r'"\$\{(\w+)\[@\]\}"', found.group(2))
    problems = [] if passed == [*groups, "CKPT_ARGS"] else \
        [f"torchrun passes {passed} but the script defines {[*groups, 'CKPT_ARGS']}"]
    if "START_ARGS" not in arrays:
        problems.append("no START_ARGS array: nothing says what the first launch loads")
    common = [w for name in passed if name != "CKPT_ARGS" for w in arrays.get(name, [])]
    return found.group(1), [common + arrays[name] for name in LOADING if name in arrays], problems
