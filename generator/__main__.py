"""`python -m generator` runs the gen-launch CLI."""

from .cli import main

main(prog_name="gen-launch")
