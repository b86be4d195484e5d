"""Worker side: the Celery app and its tasks, sandbox, workspaces, model client, artifact store."""
