"""What a writer that acknowledges raises when rows are not stored (and will not be).

Its own small module because the command hook, which imports it on every tool
call, must not pay for the queue and its thread machinery to name the error.
"""


class StoreUnavailable(RuntimeError):
    """Rows were not stored (and will not be): the reason is safe to show (no agent text)."""
