"""`python -m generator` and the `gen-launch` script run the CLI."""

import gc

# Loading the modules makes no garbage, but their objects set off 40-50 collections that walk all of them (about 5%
# of `gen-launch plan`): none run while the CLI loads, and what it loaded is frozen out of later collections, which
# then run as usual.
gc.disable()
from .cli import main  # noqa: E402

gc.freeze()
gc.enable()

if __name__ == "__main__":
    main(prog_name="gen-launch")
