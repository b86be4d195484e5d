"""Data that crosses a queue or lands in the store: pydantic models, statuses, errors. No I/O."""
