"""What a plugin's files side declares besides its functions (contract.py Output): the options of `gen-launch
validate` its checks take, and the launchers a commands.txt line may run. Apart from the contract: a plan never
renders or checks files."""

from __future__ import annotations

from .frozen import frozen


@frozen
class CheckOption:
    """An option of `gen-launch validate` a plugin's checks take, as the user types it: the flag, the environment
    variable that may stand for it, the word its help shows for the value, and the help."""

    flag: str
    envvar: str
    metavar: str
    help: str

    @property
    def dest(self) -> str:
        """The key of Job.options that carries its value."""
        return self.flag.lstrip("-").replace("-", "_")


@frozen
class Launcher:
    """A launcher script a commands.txt line may run, and where its node rank is: the `rank_at`-th word after the
    script's name (`source`: the upstream file that fixes its arguments)."""

    script: str
    rank_at: int
    source: str
