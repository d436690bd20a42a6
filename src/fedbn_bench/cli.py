"""What ``run.py`` needs besides the runner: schema registration and the user-facing error."""
from fedbn_bench.config.schema import register_schemas
from fedbn_bench.errors import UserError

__all__ = ["UserError", "register_schemas"]
