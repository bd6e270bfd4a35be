"""What the core and the framework plugins agree on, importing nothing else from the package so that every module may
import it: the contract (contract.py), the roles and how they relate (roles.py), and provenance (provenance.py: a
value with its source)."""
