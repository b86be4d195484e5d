"""``skill-eval view``: a read-mostly web app over the artifact store and, when given, the broker."""
