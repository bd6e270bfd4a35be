"""Each framework's own rules, as upstream enforces them, applied to generated files (and by the tests)."""
