"""The hardened grader: transcript fencing, verdict parsing, evidence, ensembles.

Pure modules (``transcript``, ``parse``, ``evidence``, ``ensemble``, ``deterministic``)
import no Celery, Redis, boto3 or litellm; ``judge`` talks to a model only through the
:class:`worker.models.base.ModelClient` protocol. Design notes: docs/design/grader.md.
"""
