"""The client side: CLI, repo and corpus loading, validation, run planning, enqueueing."""
