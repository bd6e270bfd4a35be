"""What the core and the framework plugins agree on, importing nothing else from the package so that every module may
import it: the contract (contract.py) and the roles (roles.py)."""
